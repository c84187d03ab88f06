// Worker, execute, config, activation and failure handling.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "testing/harness.h"
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "weir/weir.h"

namespace weir {
namespace {

using namespace std::chrono_literals;

TEST(ConfigTest, ParsesTimelyFlagsAndKeepsTheRest) {
  std::vector<std::string> args{"file.txt", "-w",    "3", "--processes=2", "-p", "1",
                                "-h",       "hosts", "x"};
  auto config = Config::from_args(args);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->workers, 3u);
  EXPECT_EQ(config->processes, 2u);
  EXPECT_EQ(config->process, 1u);
  EXPECT_EQ(config->hostfile, "hosts");
  EXPECT_EQ(args, (std::vector<std::string>{"file.txt", "x"}));
}

TEST(ConfigTest, RejectsBadValues) {
  std::vector<std::string> missing{"-w"};
  EXPECT_FALSE(Config::from_args(missing).ok());
  std::vector<std::string> zero{"-w", "0"};
  EXPECT_FALSE(Config::from_args(zero).ok());
  std::vector<std::string> junk{"--workers", "two"};
  auto bad = Config::from_args(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--workers"), std::string::npos);
  std::vector<std::string> index{"-n", "2", "-p", "2"};
  EXPECT_FALSE(Config::from_args(index).ok());
}

TEST(ConfigTest, InsecureLinksIsASwitch) {
  std::vector<std::string> args{"--insecure-links", "file.txt"};
  auto config = Config::from_args(args);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->insecure_links);
  EXPECT_EQ(args, (std::vector<std::string>{"file.txt"}));
  std::vector<std::string> none{"file.txt"};
  EXPECT_FALSE(Config::from_args(none)->insecure_links);
  std::vector<std::string> off{"--insecure-links=0"};
  EXPECT_FALSE(Config::from_args(off)->insecure_links);
  std::vector<std::string> junk{"--insecure-links=maybe"};
  EXPECT_FALSE(Config::from_args(junk).ok());
  // NOLINTNEXTLINE(concurrency-mt-unsafe): no other thread runs yet.
  ::setenv("WEIR_INSECURE_LINKS", "1", 1);
  std::vector<std::string> from_env;
  auto with_env = Config::from_args(from_env);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): as above.
  ::unsetenv("WEIR_INSECURE_LINKS");
  ASSERT_TRUE(with_env.ok()) << with_env.status();
  EXPECT_TRUE(with_env->insecure_links);
}

TEST(ConfigTest, ArgvFormKeepsProgramArguments) {
  char a0[] = "prog", a1[] = "-w", a2[] = "2", a3[] = "input", a4[] = "--workers", a5[] = "4";
  char* argv[] = {a0, a1, a2, a3, a4, a5, nullptr};
  int argc = 6;
  auto config = Config::from_args(argc, argv);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->workers, 4u);
  ASSERT_EQ(argc, 2);
  EXPECT_STREQ(argv[1], "input");
}

TEST(ExecuteTest, MultipleProcessesAreRejectedUntilTheClusterExists) {
  Config config;
  config.processes = 2;
  absl::Status status = execute(config, [](Worker&) {});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("-n"), std::string::npos);
}

TEST(ExecuteTest, ReturnsOneResultPerWorker) {
  auto results = testing::run_workers(3, [](Worker& worker) { return worker.index() * 10; });
  ASSERT_TRUE(results.ok());
  EXPECT_EQ(*results, (std::vector<size_t>{0, 10, 20}));
}

TEST(ExecuteTest, ExceptionInOperatorNamesTheOperator) {
  for (size_t workers : {1, 2, 4}) {
    testing::Watchdog watchdog("exception test");
    absl::Status status = testing::run_workers(workers, [](Worker& worker) {
      ProbeHandle<uint64_t> probe;
      auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        auto [handle, stream] = new_input<uint64_t>(scope);
        unary<uint64_t>(stream | exchange([](const uint64_t& x) { return x; }), Pipeline{},
                        "Exploder",
                        [](Capability<uint64_t>, OperatorInfo) {
                          return [](auto& in, auto& out) {
                            in.for_each([&](const auto& cap, std::vector<uint64_t>& data) {
                              for (uint64_t x : data) {
                                if (x == 7) throw std::runtime_error("seven is not allowed");
                              }
                              out.session(cap).give_vec(data);
                            });
                          };
                        }) |
            probe_with(probe);
        return std::move(handle);
      });
      for (uint64_t round = 0; round < 20; ++round) {
        input.send(round);
        input.advance_to(round + 1);
        while (probe.less_than(round + 1)) worker.step();
      }
    });
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("'Exploder'"), std::string::npos) << status;
    EXPECT_NE(status.message().find("seven is not allowed"), std::string::npos) << status;
  }
}

// A dataflow of one input into an operator named `name` that runs `body` on every batch.
template <class Body>
absl::Status run_through_operator(const Config& config, const char* name, Body body) {
  return execute(config, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      unary<uint64_t>(stream, Pipeline{}, name,
                      [body, index = worker.index()](Capability<uint64_t>, OperatorInfo) {
                        return [body, index](auto& in, auto& out) {
                          in.for_each([&](const auto& cap, std::vector<uint64_t>& data) {
                            body(index);
                            out.session(cap).give_vec(data);
                          });
                        };
                      }) |
          probe_with(probe);
      return std::move(handle);
    });
    input.send(1);
    input.advance_to(1);
    while (probe.less_than(1) && !worker.failed()) worker.step();
  });
}

// Issue 14: a worker stuck in one run of an operator is found by the watchdog, which fails the
// execution naming the worker and the operator; one that leaves the operator soon after lets
// the execution end in order, with that error.
TEST(WatchdogTest, AWorkerLongInOneOperatorFailsTheExecutionNamingIt) {
  Config config;
  config.workers = 2;
  config.operator_timeout = 200ms;
  absl::Status status = run_through_operator(config, "Sleeper", [](size_t index) {
    if (index == 1) std::this_thread::sleep_for(700ms);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("worker 1 (process 0)"), std::string::npos) << status;
  EXPECT_NE(status.message().find("operator 'Sleeper' in dataflow 'Dataflow'"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("--operator-timeout-ms 200"), std::string::npos) << status;
}

TEST(WatchdogTest, AnOperatorWithinTheBoundIsLeftAlone) {
  Config config;
  config.workers = 2;
  config.operator_timeout = 2000ms;
  EXPECT_TRUE(run_through_operator(config, "Napper", [](size_t) {
                std::this_thread::sleep_for(100ms);
              }).ok());
}

TEST(WatchdogTest, OnByDefaultOnlyInAClusterAndZeroTurnsItOff) {
  Config config;
  EXPECT_EQ(config.effective_operator_timeout(), 0ms);
  config.processes = 2;
  EXPECT_EQ(config.effective_operator_timeout(), 60000ms);
  std::vector<std::string> args{"--operator-timeout-ms", "0", "-n", "2"};
  auto parsed = Config::from_args(args);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->effective_operator_timeout(), 0ms);
  // Beyond about 11.6 days the watchdog's clock sums would overflow.
  std::vector<std::string> huge{"--operator-timeout-ms", "1000000001"};
  auto refused = Config::from_args(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--operator-timeout-ms is at most 1000000000"),
            std::string::npos)
      << refused.status();
}

// Once the execution has failed (here: another worker's operator threw), a worker that stays
// in an operator run for a second is stuck, whatever the bound: the process ends.
TEST(WatchdogDeathTest, AWorkerThatStaysInItsOperatorAfterAFailureEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Config config;
        config.workers = 2;
        config.operator_timeout = 600000ms;
        (void)run_through_operator(config, "Lingerer", [](size_t index) {
          if (index == 0) {
            std::this_thread::sleep_for(300ms);  // Worker 1 is in its run by then.
            throw std::runtime_error("worker 0 gives up");
          }
          for (;;) std::this_thread::sleep_for(100ms);
        });
      },
      ::testing::ExitedWithCode(1),
      "operator 'Lingerer' .* and has not left it 1000 ms after the execution failed");
}

// A worker that never leaves its operator cannot be joined: the process writes the error and
// exits 1 (in a cluster, after saying Goodbye with it to every peer).
TEST(WatchdogDeathTest, AWorkerThatNeverLeavesItsOperatorEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Config config;
        config.operator_timeout = 200ms;
        (void)run_through_operator(config, "Forever", [](size_t) {
          for (;;) std::this_thread::sleep_for(100ms);
        });
      },
      ::testing::ExitedWithCode(1), "operator 'Forever' in dataflow 'Dataflow'");
}

TEST(ExecuteTest, ExceptionInWorkerClosureIsReported) {
  absl::Status status = testing::run_workers(2, [](Worker& worker) {
    if (worker.index() == 1) throw std::runtime_error("bad setup");
  });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("worker 1"), std::string::npos);
}

TEST(ExecuteTest, CycleWithoutAdvanceFailsTheBuild) {
  absl::Status status = testing::run_workers(1, [](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [loop, cycle] = feedback<uint64_t>(scope, IntSummary<uint64_t>{0});
      cycle | map([](uint64_t x) { return x; }) | connect_loop(loop);
    });
  });
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not advance time"), std::string::npos) << status;
}

TEST(ExecuteTest, UnconnectedFeedbackFailsTheBuild) {
  absl::Status status = testing::run_workers(1, [](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [loop, cycle] = feedback<uint64_t>(scope, IntSummary<uint64_t>{1});
      cycle | inspect([](const uint64_t&) {});
    });
  });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("Feedback"), std::string::npos) << status;
}

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

TEST(WorkerTest, IdleWorkerParksInsteadOfSpinning) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      stream | inspect([](const uint64_t&) {});
      return std::move(handle);
    });
    while (worker.step()) {
    }
    const double before = thread_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < 300ms) worker.step_or_park(100ms);
    return thread_cpu_seconds() - before;
  });
  ASSERT_TRUE(result.ok());
  // Parked, the thread uses a small fraction of the 300 ms (spinning would use all of it).
  EXPECT_LT((*result)[0], 0.1);
}

TEST(WorkerTest, SyncActivatorWakesAParkedWorker) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::atomic<bool> go{false};
    uint64_t emitted = 0;
    SyncActivator activator;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      source<uint64_t>(scope, "Waiter", [&](Capability<uint64_t> cap, OperatorInfo info) {
        activator = info.sync_activator;
        std::optional<Capability<uint64_t>> held(std::move(cap));
        return [&, held](auto& output) mutable {
          if (held && go.load()) {
            output.session(*held).give(42);
            ++emitted;
            held.reset();
          }
        };
      });
    });
    std::thread other([&] {
      std::this_thread::sleep_for(50ms);
      go.store(true);
      activator.activate();
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    other.join();
    return emitted;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ((*result)[0], 1u);
}

TEST(WorkerTest, ActivateAfterRunsTheOperatorLater) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    int runs = 0;
    auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration waited{};
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      source<uint64_t>(scope, "Timer", [&](Capability<uint64_t> cap, OperatorInfo info) {
        std::optional<Capability<uint64_t>> held(std::move(cap));
        return [&, held, path = info.path](auto&) mutable {
          if (++runs == 1) {
            worker.activate_after(path, 30ms);
          } else if (held) {
            waited = std::chrono::steady_clock::now() - start;
            held.reset();
          }
        };
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return std::pair<int, bool>{runs, waited >= 30ms};
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ((*result)[0].first, 2);
  EXPECT_TRUE((*result)[0].second);
}

TEST(WorkerTest, DroppingADataflowReleasesItsCapabilities) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    const int64_t before = live_capabilities_on_this_thread();
    std::optional<InputHandle<uint64_t, uint64_t>> input;
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      stream | delay([](const uint64_t&, const uint64_t& t) { return t + 100; }) |
          inspect([](const uint64_t&) {});
      input.emplace(std::move(handle));
    });
    input->send(1);
    for (int i = 0; i < 10; ++i) worker.step();
    const int64_t during = live_capabilities_on_this_thread();
    worker.drop_dataflow(index);
    input->send(2);  // The dataflow is gone: sending does nothing.
    input.reset();
    return std::tuple<int64_t, int64_t, bool>{
        during - before, live_capabilities_on_this_thread() - before, worker.has_dataflows()};
  });
  ASSERT_TRUE(result.ok());
  auto [during, after, remaining] = (*result)[0];
  EXPECT_GT(during, 0);
  EXPECT_EQ(after, 0);
  EXPECT_FALSE(remaining);
}

// The operator ABI: an operator written directly against Operator<T>, plugged into a scope.
class Doubler final : public Operator<uint64_t> {
 public:
  Doubler(std::shared_ptr<ChannelEnd<uint64_t, uint64_t>> in, OutputPort<uint64_t, uint64_t>* out)
      : in_(std::move(in)), out_(out) {
    progress_.resize(1, 1);
    progress_.internals[0]->update(0,
                                   -1);  // Drop the initial capability: output only follows input.
  }
  std::string_view name() const override { return "Doubler"; }
  uint32_t inputs() const override { return 1; }
  uint32_t outputs() const override { return 1; }
  Connectivity<uint64_t> connectivity() const override {
    return identity_connectivity<uint64_t>(1, 1);
  }
  bool notify_me() const override { return false; }
  bool schedule() override {
    while (auto* message = in_->pull()) {
      progress_.consumeds[0]->update(message->time, static_cast<int64_t>(message->data.size()));
      for (uint64_t x : message->data) out_->give(message->time, 2 * x);
    }
    return false;
  }

 private:
  std::shared_ptr<ChannelEnd<uint64_t, uint64_t>> in_;
  OutputPort<uint64_t, uint64_t>* out_;
};

TEST(OperatorAbiTest, HandWrittenOperatorRunsInAScope) {
  auto result = testing::run_workers(2, [](Worker& worker) {
    std::vector<uint64_t> seen;
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      const uint32_t node = scope.reserve_node("Doubler");
      auto end = stream.connect_to(Target{node, 0}, Exchange([](const uint64_t& x) { return x; }));
      auto& port = scope.add_output_port<uint64_t>(node);
      scope.add_operator(node, std::make_unique<Doubler>(end, &port));
      Stream<uint64_t, uint64_t>(scope, Source{node, 0}) |
          inspect([&](const uint64_t& x) { seen.push_back(x); }) | probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t i = 0; i < 10; ++i) input.send(i);
    input.advance_to(1);
    testing::step_until(worker, [&] { return !probe.less_than(1); });
    return seen;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<uint64_t> all;
  for (auto& r : *result) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<uint64_t> expected;
  for (uint64_t w = 0; w < 2; ++w) {
    for (uint64_t i = 0; i < 10; ++i) expected.push_back(2 * i);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
}

TEST(ActivationsTest, ExtensionsAreSortedAndDeduplicated) {
  Activations activations;
  std::vector<size_t> a{0, 3}, b{0, 1}, c{0, 3, 2}, d{1, 0}, e{0};
  for (auto* p : {&a, &b, &c, &d, &e, &a}) activations.activate(*p);
  activations.advance();
  std::vector<size_t> children;
  std::vector<size_t> prefix{0};
  activations.for_extensions(prefix, [&](size_t i) { children.push_back(i); });
  EXPECT_EQ(children, (std::vector<size_t>{1, 3}));
  std::vector<size_t> roots;
  activations.for_extensions({}, [&](size_t i) { roots.push_back(i); });
  EXPECT_EQ(roots, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(activations.empty());
}

}  // namespace
}  // namespace weir
