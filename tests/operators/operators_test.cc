// Tests of the standard operators, each on 1, 2 and 4 workers: what comes out equals what a
// plain computation over the same input says.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using T = uint64_t;
using Out = std::vector<std::pair<T, uint64_t>>;

class OperatorsTest : public ::testing::TestWithParam<size_t> {
 protected:
  size_t workers() const { return GetParam(); }

  // Every worker sends 0..99 at time x / 10; `build` turns the input into the observed stream.
  // Returns every (time, record) observed, on all workers, sorted.
  template <class Build>
  Out run(Build build, uint64_t records = 100) {
    auto results = testing::run_workers(workers(), [&](Worker& worker) {
      Out seen;
      ProbeHandle<T> probe;
      auto input = worker.dataflow<T>([&](Scope<T>& scope) {
        auto [handle, stream] = new_input<uint64_t>(scope);
        build(stream) |
            inspect_time([&](const T& t, const uint64_t& x) { seen.emplace_back(t, x); }) |
            probe_with(probe);
        return std::move(handle);
      });
      for (uint64_t x = 0; x < records; ++x) {
        if (input.time() < x / 10) input.advance_to(x / 10);
        input.send(x);
      }
      input.close();
      testing::step_until(worker, [&] { return probe.done(); });
      return seen;
    });
    EXPECT_TRUE(results.ok()) << results.status();
    Out all;
    if (results.ok()) {
      for (auto& r : *results) all.insert(all.end(), r.begin(), r.end());
    }
    std::sort(all.begin(), all.end());
    return all;
  }

  // The expected multiset: each worker contributes f(x) for x in 0..99.
  template <class F>
  Out expect(F f, uint64_t records = 100) {
    Out out;
    for (size_t w = 0; w < workers(); ++w) {
      for (uint64_t x = 0; x < records; ++x) f(x / 10, x, out);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

// One name for "give a whole vector": InputHandle::give_vec, as Session::give_vec; send_batch stays
// one release as a deprecated alias.
TEST(InputHandleTest, GiveVecSendsAWholeBatch) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::vector<uint64_t> seen;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      stream | inspect_batch([&](const uint64_t&, const std::vector<uint64_t>& batch) {
        seen.insert(seen.end(), batch.begin(), batch.end());
      });
      return std::move(handle);
    });
    std::vector<uint64_t> batch{1, 2, 3};
    input.give_vec(batch);
    EXPECT_TRUE(batch.empty());
    batch = {4};
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    input.send_batch(batch);
#pragma GCC diagnostic pop
    input.close();
    while (worker.step_or_park(std::chrono::milliseconds(1))) {
    }
    return seen;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)[0], (std::vector<uint64_t>{1, 2, 3, 4}));
}

TEST_P(OperatorsTest, Map) {
  EXPECT_EQ(run([](auto s) { return s | map([](uint64_t x) { return x * 3; }); }),
            expect([](T t, uint64_t x, Out& o) { o.emplace_back(t, x * 3); }));
}

TEST_P(OperatorsTest, MapInPlace) {
  EXPECT_EQ(run([](auto s) { return s | map_in_place([](uint64_t& x) { x += 5; }); }),
            expect([](T t, uint64_t x, Out& o) { o.emplace_back(t, x + 5); }));
}

TEST_P(OperatorsTest, FlatMap) {
  EXPECT_EQ(run([](auto s) {
              return s | flat_map([](uint64_t x) { return std::vector<uint64_t>(x % 3, x); });
            }),
            expect([](T t, uint64_t x, Out& o) {
              for (uint64_t i = 0; i < x % 3; ++i) o.emplace_back(t, x);
            }));
}

TEST_P(OperatorsTest, Filter) {
  EXPECT_EQ(run([](auto s) { return s | filter([](const uint64_t& x) { return x % 7 == 0; }); }),
            expect([](T t, uint64_t x, Out& o) {
              if (x % 7 == 0) o.emplace_back(t, x);
            }));
}

TEST_P(OperatorsTest, InspectVariantsSeeEverything) {
  std::atomic<uint64_t> records{0}, batches{0}, timed{0};
  auto out = run([&](auto s) {
    return s | inspect([&](const uint64_t&) { ++records; }) |
           inspect_batch([&](const T&, const std::vector<uint64_t>& b) { batches += b.size(); }) |
           inspect_time([&](const T& t, const uint64_t& x) { timed += (t == x / 10); });
  });
  EXPECT_EQ(out.size(), 100 * workers());
  EXPECT_EQ(records, 100 * workers());
  EXPECT_EQ(batches, 100 * workers());
  EXPECT_EQ(timed, 100 * workers());
}

TEST_P(OperatorsTest, ExchangeRoutesByKey) {
  const size_t peers = workers();
  auto results = testing::run_workers(peers, [&](Worker& worker) {
    std::vector<uint64_t> seen;
    worker.dataflow<T>([&](Scope<T>& scope) {
      std::vector<uint64_t> mine(50);
      std::iota(mine.begin(), mine.end(), 0);
      to_stream(scope, mine) | exchange([](const uint64_t& x) { return x; }) |
          inspect([&](const uint64_t& x) { seen.push_back(x); });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return seen;
  });
  ASSERT_TRUE(results.ok());
  for (size_t w = 0; w < peers; ++w) {
    EXPECT_EQ((*results)[w].size(), peers * (50 / peers + (w < 50 % peers ? 1 : 0)));
    for (uint64_t x : (*results)[w]) EXPECT_EQ(x % peers, w);
  }
}

TEST_P(OperatorsTest, BroadcastReachesEveryWorker) {
  EXPECT_EQ(run([](auto s) { return s | broadcast(); }), expect([&](T t, uint64_t x, Out& o) {
              for (size_t w = 0; w < workers(); ++w) o.emplace_back(t, x);
            }));
}

TEST_P(OperatorsTest, ConcatAndConcatenate) {
  EXPECT_EQ(run([](auto s) {
              auto doubled = s | map([](uint64_t x) { return 2 * x; });
              auto plus = s | map([](uint64_t x) { return x + 1000; });
              auto both = doubled | concat(plus);
              return concatenate(s.scope(), std::vector{both, s});
            }),
            expect([](T t, uint64_t x, Out& o) {
              o.emplace_back(t, 2 * x);
              o.emplace_back(t, x + 1000);
              o.emplace_back(t, x);
            }));
}

TEST_P(OperatorsTest, PartitionBranchAndOkErr) {
  EXPECT_EQ(run([](auto s) {
              auto parts = partition(s, 3, [](uint64_t x) {
                return std::pair<uint64_t, uint64_t>{x % 3, x};
              });
              auto tagged0 = parts[0] | map([](uint64_t x) { return x * 10 + 0; });
              auto tagged2 = parts[2] | map([](uint64_t x) { return x * 10 + 2; });
              auto [small, big] = s | branch([](const T&, const uint64_t& x) { return x >= 50; });
              auto [early, late] = s | branch_when([](const T& t) { return t >= 5; });
              auto [oks, errs] = s | ok_err([](uint64_t x) -> std::variant<uint64_t, std::string> {
                                   if (x % 2) return std::to_string(x);
                                   return x;
                                 });
              auto from_errs = errs | map([](std::string e) {
                                 return static_cast<uint64_t>(std::stoull(e)) + 100000;
                               });
              return concatenate(
                  s.scope(),
                  std::vector{tagged0, tagged2, big | map([](uint64_t x) { return x + 1000; }),
                              late | map([](uint64_t x) { return x + 2000; }),
                              oks | map([](uint64_t x) { return x + 3000; }), from_errs});
            }),
            expect([](T t, uint64_t x, Out& o) {
              if (x % 3 == 0) o.emplace_back(t, x * 10);
              if (x % 3 == 2) o.emplace_back(t, x * 10 + 2);
              if (x >= 50) o.emplace_back(t, x + 1000);
              if (t >= 5) o.emplace_back(t, x + 2000);
              if (x % 2 == 0) o.emplace_back(t, x + 3000);
              if (x % 2 == 1) o.emplace_back(t, x + 100000);
            }));
}

TEST_P(OperatorsTest, DelayMovesRecordsToLaterTimes) {
  EXPECT_EQ(run([](auto s) {
              return s | delay([](const uint64_t& x, const T& t) { return t + x % 4; });
            }),
            expect([](T t, uint64_t x, Out& o) { o.emplace_back(t + x % 4, x); }));
  EXPECT_EQ(run([](auto s) { return s | delay_batch([](const T& t) { return (t / 3 + 1) * 3; }); }),
            expect([](T t, uint64_t x, Out& o) { o.emplace_back((t / 3 + 1) * 3, x); }));
}

TEST_P(OperatorsTest, CountAndAccumulatePerTimePerWorker) {
  EXPECT_EQ(run([](auto s) { return s | count(); }), expect([](T t, uint64_t x, Out& o) {
              if (x % 10 == 0) o.emplace_back(t, 10);
            }));
  EXPECT_EQ(run([](auto s) {
              return s | accumulate(uint64_t{0}, [](uint64_t& acc, const std::vector<uint64_t>& b) {
                       for (uint64_t x : b) acc += x;
                     });
            }),
            expect([](T t, uint64_t x, Out& o) {
              if (x % 10 == 0) o.emplace_back(t, 10 * x + 45);
            }));
}

TEST_P(OperatorsTest, AggregateSumsPerKeyAcrossWorkers) {
  auto out = run([](auto s) {
    return s | map([](uint64_t x) {
             return std::pair<uint64_t, uint64_t>{x % 4, x};
           }) |
           aggregate<uint64_t>([](const uint64_t&, uint64_t v, uint64_t& agg) { agg += v; },
                               [](uint64_t key, uint64_t agg) { return agg * 10 + key; },
                               [](const uint64_t& key) { return key; });
  });
  std::map<std::pair<T, uint64_t>, uint64_t> sums;
  for (size_t w = 0; w < workers(); ++w) {
    for (uint64_t x = 0; x < 100; ++x) sums[{x / 10, x % 4}] += x;
  }
  Out expected;
  for (auto& [tk, sum] : sums) expected.emplace_back(tk.first, sum * 10 + tk.second);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(out, expected);
}

TEST_P(OperatorsTest, UnaryNotifyDeliversInTimeOrderOnceComplete) {
  auto out = run([](auto s) {
    std::map<T, uint64_t> sums;
    return unary_notify<uint64_t>(
        s, Pipeline{}, "SumAtCompletion", {},
        [sums](auto& input, auto& output, Notificator<T>& notificator) mutable {
          input.for_each([&](const InputCapability<T>& cap, std::vector<uint64_t>& data) {
            for (uint64_t x : data) sums[cap.time()] += x;
            notificator.notify_at(cap.retain());
          });
          T last = 0;
          notificator.for_each([&](Capability<T> cap, uint64_t count, auto& n) {
            EXPECT_GE(cap.time(), last);
            EXPECT_FALSE(n.frontier(0).less_equal(cap.time()));
            EXPECT_GE(count, 1u);
            last = cap.time();
            output.session(cap).give(sums[cap.time()]);
            sums.erase(cap.time());
          });
        });
  });
  EXPECT_EQ(out, expect([](T t, uint64_t x, Out& o) {
              if (x % 10 == 0) o.emplace_back(t, 10 * x + 45);
            }));
}

TEST_P(OperatorsTest, BinaryOperatorsJoinTwoInputs) {
  auto out = run([](auto s) {
    auto left = s | map([](uint64_t x) { return x; });
    auto right = s | map([](uint64_t x) { return x * 100; });
    auto plain = binary<uint64_t>(left, right, Pipeline{}, Pipeline{}, "Both",
                                  [](Capability<T>, OperatorInfo) {
                                    return [](auto& a, auto& b, auto& output) {
                                      a.for_each([&](const auto& cap, std::vector<uint64_t>& d) {
                                        output.session(cap).give_vec(d);
                                      });
                                      b.for_each([&](const auto& cap, std::vector<uint64_t>& d) {
                                        output.session(cap).give_vec(d);
                                      });
                                    };
                                  });
    auto frontiered =
        binary_frontier<uint64_t>(left, right, Exchange([](const uint64_t& x) { return x; }),
                                  Pipeline{}, "Frontier", [](Capability<T>, OperatorInfo) {
                                    return [](auto& a, auto& b, auto& output) {
                                      a.for_each([&](const auto& cap, std::vector<uint64_t>& d) {
                                        EXPECT_TRUE(a.frontier().less_equal(cap.time()));
                                        output.session(cap).give_vec(d);
                                      });
                                      b.for_each([&](const auto&, std::vector<uint64_t>&) {});
                                    };
                                  });
    auto notified = binary_notify<uint64_t>(
        left, right, Pipeline{}, Pipeline{}, "Notify", {},
        [](auto& a, auto& b, auto& output, Notificator<T>& n) {
          a.for_each([&](const auto& cap, std::vector<uint64_t>&) { n.notify_at(cap.retain()); });
          b.for_each([&](const auto&, std::vector<uint64_t>&) {});
          n.for_each([&](Capability<T> cap, uint64_t, auto&) {
            output.session(cap).give(1000000 + cap.time());
          });
        });
    return concatenate(s.scope(), std::vector{plain, frontiered, notified});
  });
  EXPECT_EQ(out, expect([](T t, uint64_t x, Out& o) {
              o.emplace_back(t, x);
              o.emplace_back(t, x * 100);
              o.emplace_back(t, x);
              if (x % 10 == 0) o.emplace_back(t, 1000000 + t);
            }));
}

TEST_P(OperatorsTest, SinkSeesFrontierAndData) {
  std::atomic<uint64_t> sunk{0};
  std::atomic<bool> saw_empty_frontier{false};
  run([&](auto s) {
    sink(s, Pipeline{}, "Sink", [&](auto& input) {
      input.for_each([&](const auto&, std::vector<uint64_t>& d) { sunk += d.size(); });
      if (input.frontier().is_empty()) saw_empty_frontier = true;
    });
    return s;
  });
  EXPECT_EQ(sunk, 100 * workers());
  EXPECT_TRUE(saw_empty_frontier);
}

TEST_P(OperatorsTest, SourceProducesAcrossActivations) {
  auto results = testing::run_workers(workers(), [&](Worker& worker) {
    Out seen;
    worker.dataflow<T>([&](Scope<T>& scope) {
      source<uint64_t>(scope, "Counter", [](Capability<T> cap, OperatorInfo info) {
        std::optional<Capability<T>> held(std::move(cap));
        uint64_t next = 0;
        return [held, next, info](auto& output) mutable {
          if (!held) return false;
          output.session(*held).give(next);
          if (++next == 5) {
            held.reset();
            return false;
          }
          held->downgrade(next);
          return true;  // Run again.
        };
      }) | inspect_time([&](const T& t, const uint64_t& x) { seen.emplace_back(t, x); });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return seen;
  });
  ASSERT_TRUE(results.ok());
  for (auto& seen : *results) {
    EXPECT_EQ(seen, (Out{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}}));
  }
}

TEST_P(OperatorsTest, UnorderedInputSendsAtAnyHeldTime) {
  auto results = testing::run_workers(workers(), [&](Worker& worker) {
    Out seen;
    ProbeHandle<T> probe;
    std::optional<UnorderedInput<T, uint64_t>> input;
    std::optional<UnorderedInput<T, uint64_t>::ActivateCapability> cap;
    worker.dataflow<T>([&](Scope<T>& scope) {
      auto [handle, initial, stream] = new_unordered_input<uint64_t>(scope);
      input.emplace(std::move(handle));
      cap.emplace(std::move(initial));
      stream | inspect_time([&](const T& t, const uint64_t& x) { seen.emplace_back(t, x); }) |
          probe_with(probe);
    });
    auto at5 = cap->delayed(5);
    auto at3 = cap->delayed(3);
    cap.reset();
    input->session(at5).give(50);
    input->session(at3).give(30);
    at3 = at5;  // Drop time 3.
    testing::step_until(worker, [&] { return !probe.less_than(5); });
    const bool held_at_5 = probe.less_equal(5);
    at5.downgrade(6);
    at3 = at5;
    testing::step_until(worker, [&] { return !probe.less_than(6); });
    return std::pair{seen, held_at_5};
  });
  ASSERT_TRUE(results.ok()) << results.status();
  for (auto& [seen, held] : *results) {
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (Out{{3, 30}, {5, 50}}));
    EXPECT_TRUE(held);
  }
}

// A session kept open while its capability moves on holds its own time back, as an operator's
// session does: what it gives later is never behind the frontier downstream.
TEST_P(OperatorsTest, UnorderedInputSessionHoldsItsTime) {
  auto results = testing::run_workers(workers(), [&](Worker& worker) {
    ProbeHandle<T> probe;
    std::vector<bool> behind_frontier;  // Per record: had the probe passed its time already?
    std::optional<UnorderedInput<T, uint64_t>> input;
    std::optional<UnorderedInput<T, uint64_t>::ActivateCapability> cap;
    worker.dataflow<T>([&](Scope<T>& scope) {
      auto [handle, initial, stream] = new_unordered_input<uint64_t>(scope);
      input.emplace(std::move(handle));
      cap.emplace(std::move(initial));
      stream | inspect_time([&](const T& t, const uint64_t&) {
        behind_frontier.push_back(!probe.less_equal(t));
      }) | probe_with(probe);
    });
    bool passed_0_while_open = false;
    {
      auto session = input->session(*cap);
      cap->downgrade(5);
      for (int i = 0; i < 100; ++i) worker.step();
      passed_0_while_open = !probe.less_equal(0);
      session.give(1);
    }
    cap.reset();
    testing::step_until(worker, [&] { return probe.done(); });
    return std::pair{behind_frontier, passed_0_while_open};
  });
  ASSERT_TRUE(results.ok()) << results.status();
  for (auto& [behind, passed] : *results) {
    EXPECT_FALSE(passed) << "the frontier passed the time of an open session";
    EXPECT_EQ(behind, std::vector<bool>{false});
  }
}

TEST_P(OperatorsTest, FeedbackLoopIterates) {
  // Each record halves each round until zero; all iterations are observed at time t + round.
  auto out = run([](auto s) {
    auto [loop, cycle] = feedback<uint64_t>(s.scope(), IntSummary<T>{1});
    auto entry = s | concat(cycle);
    auto [stop, again] = entry | map([](uint64_t x) { return x / 2; }) |
                         branch([](const T&, const uint64_t& x) { return x > 0; });
    again | connect_loop(loop);
    return entry;
  });
  EXPECT_EQ(out, expect([](T t, uint64_t x, Out& o) {
              for (uint64_t r = 0; x > 0 || r == 0; ++r, x /= 2) o.emplace_back(t + r, x);
            }));
}

TEST_P(OperatorsTest, CaptureAndReplayReproduceDataAndProgress) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("weir-capture-" + std::to_string(::getpid()) + "-" + std::to_string(workers()));
  std::filesystem::create_directories(dir);
  std::vector<std::string> paths;
  for (size_t w = 0; w < workers(); ++w)
    paths.push_back((dir / ("w" + std::to_string(w) + ".cap")).string());
  auto original = run([&](auto s) {
    auto out =
        s | map([](uint64_t x) { return x + 1; }) | exchange([](const uint64_t& x) { return x; });
    return capture_to_file(out, paths[out.scope().index()]);
  });
  // Replay on a different number of workers; the frontier must follow the captured one.
  for (size_t replay_workers : {size_t{1}, size_t{3}}) {
    auto replayed = testing::run_workers(replay_workers, [&](Worker& worker) {
      Out seen;
      std::vector<std::pair<std::vector<T>, Out>> frontier_log;
      worker.dataflow<T>([&](Scope<T>& scope) {
        auto stream = replay_from_files<uint64_t>(scope, paths);
        unary_frontier<uint64_t>(stream, Pipeline{}, "Check", [&](Capability<T>, OperatorInfo) {
          return [&](auto& input, auto&) {
            input.for_each([&](const auto& cap, std::vector<uint64_t>& d) {
              EXPECT_TRUE(input.frontier().less_equal(cap.time()));
              for (uint64_t x : d) seen.emplace_back(cap.time(), x);
            });
          };
        });
      });
      while (worker.step_or_park(std::nullopt)) {
      }
      return seen;
    });
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    Out all;
    for (auto& r : *replayed) all.insert(all.end(), r.begin(), r.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, original);
  }
  // A truncated file is a clear error naming the file.
  {
    std::filesystem::resize_file(paths[0], std::filesystem::file_size(paths[0]) - 3);
    absl::Status status = testing::run_workers(1, [&](Worker& worker) {
      worker.dataflow<T>([&](Scope<T>& scope) {
        replay_from_files<uint64_t>(scope, {paths[0]}) | inspect([](const uint64_t&) {});
      });
    });
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find(paths[0]), std::string::npos) << status;
    EXPECT_NE(status.message().find("Replay"), std::string::npos) << status;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Workers, OperatorsTest, ::testing::Values(1, 2, 4));

TEST(CodecTest, RoundTripsAndRejectsMalformedInput) {
  using Rec =
      std::tuple<std::string, std::vector<uint64_t>, std::optional<std::pair<int, std::string>>>;
  Rec value{"hello", {1, 2, 3}, std::pair<int, std::string>{7, "seven"}};
  std::string bytes;
  Codec<Rec>::encode(value, bytes);
  std::string_view in(bytes);
  Rec decoded;
  ASSERT_TRUE(Codec<Rec>::decode(in, decoded));
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(decoded, value);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::string_view truncated(bytes.data(), cut);
    Rec out;
    EXPECT_FALSE(Codec<Rec>::decode(truncated, out)) << "cut at " << cut;
  }
  std::string huge;
  Codec<uint64_t>::encode(uint64_t{1} << 60, huge);  // A length far beyond the input.
  std::string_view h(huge);
  std::string s;
  EXPECT_FALSE(Codec<std::string>::decode(h, s));
}

}  // namespace
}  // namespace weir
