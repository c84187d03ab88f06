// Rules user code can break inside an operator (capabilities, sessions, inputs) fail the execution
// with a Status naming the operator, dataflow, worker and the rule, instead of aborting.

#include "testing/misuse.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "testing/harness.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using ::testing::HasSubstr;

// Logic of the operator "Bad": called with each batch's capability and the operator's two outputs
// (its input is connected to output 0 only).
using BadLogic = std::function<void(const InputCapability<uint64_t>&, std::vector<uint64_t>&,
                                    OperatorOutput<uint64_t, uint64_t>&,
                                    OperatorOutput<uint64_t, uint64_t>&, Capability<uint64_t>&)>;

// Runs a dataflow "misuse" with an input and the operator "Bad" on one worker; sends one record at
// time 1 and closes the input.
absl::Status run_bad(BadLogic bad) {
  Config config;
  return execute(config, [bad](Worker& worker) {
    auto input = worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      OperatorBuilder<uint64_t> builder("Bad", scope);
      auto [out0, s0] = builder.add_output<uint64_t>();
      auto [out1, s1] = builder.add_output<uint64_t>();
      auto in = builder.add_input_connection(
          stream, Pipeline{},
          {Antichain<IntSummary<uint64_t>>{{0}}, Antichain<IntSummary<uint64_t>>{}});
      builder.build([&](std::vector<Capability<uint64_t>> caps) {
        // Keeps output 1's capability (at 0) for the logic; drops output 0's.
        return [in, out0, out1, bad, held = std::optional(std::move(caps[1]))](
                   std::span<const MutableAntichain<uint64_t>> frontiers) mutable {
          in.for_each([&](const InputCapability<uint64_t>& cap, std::vector<uint64_t>& data) {
            bad(cap, data, out0, out1, *held);
          });
          if (held && frontiers[0].is_empty()) held.reset();
        };
      });
      return std::move(handle);
    });
    input.advance_to(1);
    input.send(7);
    input.close();
  });
}

using testing::expect_broken_rule;

TEST(MisuseTest, ACorrectOperatorSucceeds) {
  auto status =
      run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>& data,
                 OperatorOutput<uint64_t, uint64_t>& out0, OperatorOutput<uint64_t, uint64_t>&,
                 Capability<uint64_t>&) { out0.session(cap).give_range(data); });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(MisuseTest, DowngradeToAnEarlierTime) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) {
    Capability<uint64_t> kept = cap.retain();
    kept.downgrade(0);
  });
  expect_broken_rule(status, "downgraded only to a later time: from 1 to 0");
}

// A moved-from capability handed to a notificator is refused where it is handed over, not later
// at the session that would use it ("moved-from capability used with output 0").
TEST(MisuseTest, NotifyAtWithAMovedFromCapability) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) {
    FrontierNotificator<uint64_t> notificator;
    Capability<uint64_t> kept = cap.retain();
    Capability<uint64_t> taken = std::move(kept);
    notificator.notify_at(std::move(kept));  // NOLINT(bugprone-use-after-move): the misuse.
  });
  expect_broken_rule(status, "notify_at was given a moved-from capability");
}

TEST(MisuseTest, DelayToAnEarlierTime) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) { (void)cap.retain().delayed(0); });
  expect_broken_rule(status, "delayed only to a later time: from 1 to 0");
}

TEST(MisuseTest, UseOfAMovedFromCapability) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>& out0,
                           OperatorOutput<uint64_t, uint64_t>&, Capability<uint64_t>&) {
    Capability<uint64_t> kept = cap.retain();
    Capability<uint64_t> moved = std::move(kept);
    out0.session(kept).give(1);  // NOLINT(bugprone-use-after-move): the misuse under test.
  });
  expect_broken_rule(status, "a moved-from capability was used with output 0");
}

TEST(MisuseTest, DowngradeOfAMovedFromCapability) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) {
    Capability<uint64_t> kept = cap.retain();
    Capability<uint64_t> moved = std::move(kept);
    kept.downgrade(2);  // NOLINT(bugprone-use-after-move): the misuse under test.
  });
  expect_broken_rule(status, "a moved-from capability was downgraded");
}

TEST(MisuseTest, CapabilityForAnotherOutput) {
  auto status =
      run_bad([](const InputCapability<uint64_t>&, std::vector<uint64_t>&,
                 OperatorOutput<uint64_t, uint64_t>& out0, OperatorOutput<uint64_t, uint64_t>&,
                 Capability<uint64_t>& held1) { out0.session(held1).give(1); });
  expect_broken_rule(status, "a capability for another output was used with output 0");
}

TEST(MisuseTest, InputCapabilityForAnUnconnectedOutput) {
  auto status =
      run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                 OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>& out1,
                 Capability<uint64_t>&) { out1.session(cap).give(1); });
  expect_broken_rule(status, "input data cannot produce output 1");
}

TEST(MisuseTest, RetainForAnUnconnectedOutput) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) { (void)cap.retain_for_output(1); });
  expect_broken_rule(status, "not allowed by the input's connectivity");
}

TEST(MisuseTest, SessionWithAMovedFromInputCapability) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>& out0,
                           OperatorOutput<uint64_t, uint64_t>&, Capability<uint64_t>&) {
    auto& mutable_cap = const_cast<InputCapability<uint64_t>&>(cap);
    InputCapability<uint64_t> kept = std::move(mutable_cap);
    out0.session(cap).give(1);
  });
  expect_broken_rule(status, "moved-from input capability used with output 0");
}

TEST(MisuseTest, EmptyCapabilitySet) {
  auto status = run_bad([](const InputCapability<uint64_t>&, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) {
    CapabilitySet<uint64_t> set;
    (void)set.delayed(3);
  });
  expect_broken_rule(status, "no capability in the set is at or before 3");
}

// A rule broken in user code that catches every exception still fails the execution.
TEST(MisuseTest, CatchingTheErrorDoesNotHideIt) {
  auto status = run_bad([](const InputCapability<uint64_t>& cap, std::vector<uint64_t>&,
                           OperatorOutput<uint64_t, uint64_t>&, OperatorOutput<uint64_t, uint64_t>&,
                           Capability<uint64_t>&) {
    try {
      cap.retain().downgrade(0);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the misuse under test.
    }
  });
  expect_broken_rule(status, "downgraded only to a later time");
}

// partition's function chose a part that does not exist.
TEST(MisuseTest, PartitionOutOfRange) {
  Config config;
  auto status = execute(config, [](Worker& worker) {
    auto input = worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      auto parts = partition(stream, 2, [](uint64_t x) { return std::pair{x, x}; });
      return std::move(handle);
    });
    input.send(5);
    input.close();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("operator 'Partition'"));
  EXPECT_THAT(status.message(), HasSubstr("partition 5 out of range (2 parts)"));
}

// The worker's own code breaking a rule (an input sent back in time) fails its worker.
TEST(MisuseTest, AnInputCannotGoBack) {
  Config config;
  auto status = execute(config, [](Worker& worker) {
    auto input = worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      return std::move(handle);
    });
    input.advance_to(5);
    input.advance_to(3);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("worker 0"));
  EXPECT_THAT(status.message(), HasSubstr("an input cannot go back from 5 to 3"));
}

// A rule broken by the closure given to execute (not inside an operator) fails the execution even
// when the closure catches the UsageError and goes on.
TEST(MisuseTest, TheWorkerClosureCatchingTheErrorDoesNotHideIt) {
  Config config;
  auto status = execute(config, [](Worker& worker) {
    auto input = worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      return std::move(handle);
    });
    input.advance_to(3);
    try {
      input.advance_to(1);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the mistake being tested
    }
    input.close();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("worker 0 broke a rule: an input cannot go back from 3 to 1"));
}

// A rule broken by an operator's constructor (while the dataflow is built) names the operator.
TEST(MisuseTest, ARuleBrokenWhileBuildingNamesTheOperator) {
  Config config;
  auto status = execute(config, [](Worker& worker) {
    worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      unary<uint64_t>(stream, Pipeline{}, "Bad",
                      [](Capability<uint64_t> initial, const OperatorInfo&) {
                        Capability<uint64_t> moved = std::move(initial);
                        initial.downgrade(3);  // NOLINT(bugprone-use-after-move): the mistake
                        return [](auto&, auto&) {};
                      });
    });
  });
  expect_broken_rule(status, "a moved-from capability was downgraded (to 3)");
}

}  // namespace
}  // namespace weir
