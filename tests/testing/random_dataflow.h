// The random dataflows of the progress-tracking property test, shared by the in-process property
// test (tests/runtime/property_test.cc) and its cluster variant (tests/integration/cluster).
//
// - generate(seed, workers): a random graph (map, filter, exchange, concat, delay, branch, feedback
//   loops, nested scopes, async operators) and what each worker sends to each input. Deep nodes
//   nest 1-3 scopes (regions and iterative scopes, in any order) around a map, an exchange, a
//   random sleep on a random worker or a feedback loop, ending in an inner sink and an inner
//   probe, with or without `leave` back out: their inner sinks must see exactly the reference
//   before the dataflow completes. Keep nodes hold input capabilities across runs.
// - reference(spec): the multiset of (time, value) on every node's stream, computed on one thread.
// - run_worker(worker, spec, seed): builds the dataflow on `worker` (worker.index() is global, so
//   this also runs on the workers of a cluster), feeds its inputs with random step interleavings,
//   and records what every stream carried through this worker and any record that arrived behind
//   its input frontier.
//
// Thread safety: run_worker is worker-local; the rest are pure functions.

#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace weir::testing::random_dataflow {

using Time = uint64_t;
using Record = std::pair<Time, uint64_t>;  // (time, value)
using Multiset = std::vector<Record>;      // Sorted.

enum class Kind {
  kInput,
  kMap,
  kFilter,
  kExchange,
  kConcat,
  kDelay,
  kBranchTrue,
  kBranchFalse,
  kLoop,
  kNestedLoop,
  kRegion,
  kAsync,
  kKeep,       // Keeps each delivery's InputCapability and records until its next run.
  kDeepInner,  // What a deep node's inner sink sees (no stream of the root scope).
  kDeepOut     // What a deep node gives back: the inner sink's records, left, or its input.
};

// Flags of a kDeepInner node (Node::q); bits 8, 9, 10: level 0, 1, 2 is an iterative scope.
inline constexpr uint64_t kDeepLeave = 1, kDeepExchange = 2, kDeepLoop = 4, kDeepSleep = 8;
inline constexpr uint64_t kDeepIterativeShift = 8;

struct Node {
  Kind kind;
  size_t a = 0, b = 0;    // Upstream node indices.
  uint64_t p = 0, q = 0;  // Parameters.
};

struct Spec {
  std::vector<Node> nodes;
  // inputs[w][input]: what worker w sends to each input, in nondecreasing time order.
  std::vector<std::vector<std::vector<Record>>> inputs;
  size_t num_inputs = 0;
};

inline uint64_t apply_map(const Node& n, uint64_t x) { return (x * n.p + n.q) % 1000; }
inline bool keep(const Node& n, uint64_t x) { return x % n.p != n.q; }
inline Time delayed(const Node& n, Time t, uint64_t x) { return t + (x % n.p); }
inline bool branch_pred(const Node& n, uint64_t x) { return x % n.p == 0; }
inline Time async_time(const Node& n, Time t, uint64_t x) { return n.q == 0 ? t : t + x % n.p; }
inline uint64_t deep_map(uint64_t x) { return (x * 3 + 1) % 1000; }

inline Spec generate(uint64_t seed, size_t workers) {
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  Spec spec;
  spec.num_inputs = pick(1, 2);
  for (size_t i = 0; i < spec.num_inputs; ++i) spec.nodes.emplace_back(Kind::kInput, 0, 0, i, 0);
  const size_t ops = pick(3, 12);
  for (size_t i = 0; i < ops; ++i) {
    const size_t n = spec.nodes.size();
    // A deep node's inner sink is no stream of the root scope: never an upstream.
    auto pick_up = [&] {
      size_t up = pick(0, n - 1);
      while (spec.nodes[up].kind == Kind::kDeepInner) up = pick(0, n - 1);
      return up;
    };
    const size_t up = pick_up(), up2 = pick_up();
    switch (pick(0, 12)) {
      case 0:
        spec.nodes.emplace_back(Kind::kMap, up, 0, pick(1, 7), pick(0, 5));
        break;
      case 1:
        spec.nodes.emplace_back(Kind::kFilter, up, 0, pick(2, 5), pick(0, 1));
        break;
      case 2:
        spec.nodes.emplace_back(Kind::kExchange, up, 0, 0, 0);
        break;
      case 3:
        spec.nodes.emplace_back(Kind::kConcat, up, up2, 0, 0);
        break;
      case 4:
        spec.nodes.emplace_back(Kind::kDelay, up, 0, pick(1, 4), 0);
        break;
      case 5: {
        const uint64_t p = pick(2, 4);
        spec.nodes.emplace_back(Kind::kBranchFalse, up, 0, p, 0);
        spec.nodes.emplace_back(Kind::kBranchTrue, up, n, p, 0);  // b: the matching false node
        break;
      }
      case 6:
        spec.nodes.emplace_back(Kind::kLoop, up, 0, pick(0, 1), 0);
        break;
      case 7:
        spec.nodes.emplace_back(Kind::kAsync, up, 0, pick(1, 4), pick(0, 1));
        break;
      case 8:
        spec.nodes.emplace_back(Kind::kNestedLoop, up, 0, pick(0, 1), 0);
        break;
      case 9:
        spec.nodes.emplace_back(Kind::kRegion, up, 0, pick(1, 7), pick(0, 5));
        break;
      case 10:
      case 11: {
        const uint64_t depth = pick(1, 3);
        uint64_t flags = pick(0, 15);
        for (uint64_t level = 0; level < depth; ++level) {
          if (pick(0, 1) == 1) flags |= uint64_t{1} << (kDeepIterativeShift + level);
        }
        // A feedback loop needs the innermost scope to be iterative.
        if (flags & kDeepLoop) flags |= uint64_t{1} << (kDeepIterativeShift + depth - 1);
        spec.nodes.emplace_back(Kind::kDeepInner, up, pick(0, workers - 1), depth, flags);
        spec.nodes.emplace_back(Kind::kDeepOut, n, 0, 0, 0);  // a: the matching inner node
        break;
      }
      case 12:
        spec.nodes.emplace_back(Kind::kKeep, up, 0, 0, 0);
        break;
      default:
        spec.nodes.emplace_back(Kind::kExchange, up, 0, 0, 0);
        break;
    }
  }
  spec.inputs.resize(workers);
  for (size_t w = 0; w < workers; ++w) {
    spec.inputs[w].resize(spec.num_inputs);
    for (size_t i = 0; i < spec.num_inputs; ++i) {
      Time t = pick(0, 2);
      const size_t records = pick(0, 60);
      for (size_t r = 0; r < records; ++r) {
        if (pick(0, 5) == 0) t += pick(1, 3);
        spec.inputs[w][i].emplace_back(t, pick(0, 999));
      }
    }
  }
  return spec;
}

// The single-threaded reference: the multiset of (time, value) on every node's stream.
inline std::vector<Multiset> reference(const Spec& spec) {
  std::vector<Multiset> out(spec.nodes.size());
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const Node& n = spec.nodes[i];
    Multiset& m = out[i];
    switch (n.kind) {
      case Kind::kInput:
        for (const auto& per_worker : spec.inputs) {
          m.insert(m.end(), per_worker[n.p].begin(), per_worker[n.p].end());
        }
        break;
      case Kind::kMap:
        for (auto [t, x] : out[n.a]) m.emplace_back(t, apply_map(n, x));
        break;
      case Kind::kFilter:
        for (auto [t, x] : out[n.a]) {
          if (keep(n, x)) m.emplace_back(t, x);
        }
        break;
      case Kind::kExchange:
        m = out[n.a];
        break;
      case Kind::kConcat:
        m = out[n.a];
        m.insert(m.end(), out[n.b].begin(), out[n.b].end());
        break;
      case Kind::kDelay:
        for (auto [t, x] : out[n.a]) m.emplace_back(delayed(n, t, x), x);
        break;
      case Kind::kBranchFalse:
        for (auto [t, x] : out[n.a]) {
          if (!branch_pred(n, x)) m.emplace_back(t, x);
        }
        break;
      case Kind::kBranchTrue:
        for (auto [t, x] : out[n.a]) {
          if (branch_pred(n, x)) m.emplace_back(t, x);
        }
        break;
      case Kind::kNestedLoop: {
        // The same loop inside an iterative scope: rounds are inner times, so every iteration
        // leaves at the record's own time.
        for (auto [t, x] : out[n.a]) {
          m.emplace_back(t, x);
          for (x /= 2; x > 0; x /= 2) m.emplace_back(t, x);
        }
        break;
      }
      case Kind::kRegion:
        for (auto [t, x] : out[n.a]) m.emplace_back(t, apply_map(n, x));
        break;
      case Kind::kAsync:
        for (auto [t, x] : out[n.a]) m.emplace_back(async_time(n, t, x), x);
        break;
      case Kind::kKeep:
        m = out[n.a];
        break;
      case Kind::kDeepInner:
        for (auto [t, x] : out[n.a]) {
          uint64_t y = deep_map(x);
          m.emplace_back(t, y);
          if (n.q & kDeepLoop) {
            for (y /= 2; y > 0; y /= 2) m.emplace_back(t, y);
          }
        }
        break;
      case Kind::kDeepOut: {
        const Node& inner = spec.nodes[n.a];
        m = (inner.q & kDeepLeave) ? out[n.a] : out[inner.a];
        break;
      }
      case Kind::kLoop: {
        // Every record enters, then halves each round (time + 1) while positive.
        Multiset current = out[n.a];
        while (!current.empty()) {
          m.insert(m.end(), current.begin(), current.end());
          Multiset next;
          for (auto [t, x] : current) {
            if (x / 2 > 0) next.emplace_back(t + 1, x / 2);
          }
          current = std::move(next);
        }
        break;
      }
    }
    std::sort(m.begin(), m.end());
  }
  return out;
}

struct Outcome {
  std::vector<Multiset> streams;  // Per node, this worker's records.
  uint64_t violations = 0;        // Records behind the frontier, inner probes not done at the end.
};

// The root scope's time of a nested scope's time.
inline Time outermost(Time t) { return t; }
template <Timestamp A, Timestamp B>
Time outermost(const Product<A, B>& t) {
  return outermost(t.outer);
}

// Passes records through, recording them (at their root time) and checking them against the
// input frontier.
template <Timestamp T>
Stream<T, uint64_t> check(const Stream<T, uint64_t>& stream, Multiset* seen, uint64_t* violations) {
  return unary_frontier<uint64_t>(
      stream, Pipeline{}, "Check", [seen, violations](Capability<T>, OperatorInfo) {
        return [seen, violations](auto& input, auto& output) {
          input.for_each([&](const InputCapability<T>& cap, std::vector<uint64_t>& data) {
            if (!input.frontier().less_equal(cap.time())) ++*violations;
            for (uint64_t x : data) seen->push_back({outermost(cap.time()), x});
            output.session(cap).give_vec(data);
          });
        };
      });
}

// kKeep: an operator that moves each delivery's InputCapability (and records) out to keep them,
// and gives them only in its next run. Its input's frontier must wait for the kept ones.
inline Stream<Time, uint64_t> keep_node(const Stream<Time, uint64_t>& stream) {
  OperatorBuilder<Time> builder("Keep", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  auto [output, result] = builder.add_output<uint64_t>();
  builder.build([input, output = output](std::vector<Capability<Time>> caps) mutable {
    caps.clear();
    std::deque<std::pair<InputCapability<Time>, std::vector<uint64_t>>> kept;
    return [input, output,
            kept = std::move(kept)](std::span<const MutableAntichain<Time>>) mutable -> bool {
      for (; !kept.empty(); kept.pop_front()) {
        output.session(kept.front().first).give_vec(kept.front().second);
      }
      while (auto delivery = input.next()) {
        kept.emplace_back(std::move(delivery->capability), std::move(delivery->data));
      }
      return !kept.empty();
    };
  });
  return result;
}

// ---- Deep nodes (kDeepInner, kDeepOut) ----
template <class T>
struct IsProduct : std::false_type {};
template <class A, class B>
struct IsProduct<Product<A, B>> : std::true_type {};

struct DeepContext {
  const Node* node;
  size_t worker;
  Multiset* seen;
  uint64_t* violations;
  std::vector<std::function<bool()>>* probes;  // Each: is this inner probe done?
};

// The innermost scope of a deep node: map, maybe a sleep on one worker, maybe an exchange, maybe
// a feedback loop (halving until zero), then the inner sink (a check) and an inner probe.
template <Timestamp T>
Stream<T, uint64_t> deep_innermost(Scope<T>& scope, const Stream<T, uint64_t>& in,
                                   DeepContext& ctx) {
  const Node& n = *ctx.node;
  auto s = in | map([](uint64_t x) { return deep_map(x); });
  if (n.q & kDeepSleep) {
    s = s | map([me = ctx.worker, sleeper = n.b, slept = std::make_shared<int>(0)](uint64_t x) {
          if (me == sleeper && *slept < 3 && x % 5 == 0) {
            ++*slept;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
          return x;
        });
  }
  if (n.q & kDeepExchange) s = s | exchange([](const uint64_t& x) { return x * 7 + 3; });
  std::optional<Stream<T, uint64_t>> checked;
  if constexpr (IsProduct<T>::value) {
    if (n.q & kDeepLoop) {
      auto [loop, cycle] = loop_variable<uint64_t>(scope, uint64_t{1});
      checked = check(s | concat(cycle), ctx.seen, ctx.violations);
      auto body = *checked | map([](uint64_t x) { return x / 2; });
      if (n.q & kDeepExchange) body = body | exchange([](const uint64_t& x) { return x; });
      auto [done, again] = body | branch([](const T&, const uint64_t& x) { return x > 0; });
      again | connect_loop(loop);
    }
  }
  if (!checked) checked = check(s, ctx.seen, ctx.violations);
  ProbeHandle<T> probe;
  *checked | probe_with(probe);
  ctx.probes->push_back([probe] { return probe.done(); });
  (void)scope;
  return *checked;
}

// Level `Level` of a deep node inside `scope`: the innermost content, or one more scope around
// it. Returns the inner sink's stream brought out to `scope`, or none without `leave`.
template <int Level, Timestamp T>
std::optional<Stream<T, uint64_t>> deep_level(Scope<T>& scope, const Stream<T, uint64_t>& in,
                                              DeepContext& ctx) {
  const Node& n = *ctx.node;
  if (Level == static_cast<int>(n.p)) {
    auto checked = deep_innermost(scope, in, ctx);
    if (!(n.q & kDeepLeave)) return std::nullopt;
    return checked;
  }
  if constexpr (Level < 3) {
    auto body = [&](auto& inner) -> std::optional<Stream<T, uint64_t>> {
      auto result = deep_level<Level + 1>(inner, inner.enter(in), ctx);
      if (!result) return std::nullopt;
      return inner.leave(*result);
    };
    if ((n.q >> (kDeepIterativeShift + Level)) & 1) return scope.template iterative<uint64_t>(body);
    return scope.region(body);
  }
  return std::nullopt;
}
// ---- end of deep nodes ----

// ---- Async operator nodes (kAsync) ----
// q == 0: an async pass-through that gives each record at its input capability, with so little
// fuel that it yields in the middle of batches. q == 1: an async delay by x % p behind an
// exchange: it stashes records and holds a capability set at the earliest of its input frontier
// and what it stashed, across suspensions, giving each record once the frontier passes its time.
inline Stream<Time, uint64_t> async_node(const Stream<Time, uint64_t>& stream, const Node& n) {
  AsyncOperatorBuilder<Time> builder("Async", stream.scope());
  using Caps = std::span<CapabilitySet<Time>>;
  if (n.q == 0) {
    auto in = builder.add_input(stream, Pipeline{});
    auto [out, result] = builder.add_output<uint64_t>();
    builder.set_fuel(2 * sizeof(uint64_t));
    builder.build([in, out](AsyncContext&, Caps caps) mutable {
      caps[0].clear();
      for (;;) {
        auto event = in.next();
        if (event.is_end()) return;
        if (auto* data = event.data()) {
          for (uint64_t x : data->batch) out.give(data->capability, x);
        }
      }
    });
    return result;
  }
  auto in = builder.add_input(stream, Exchange([](const uint64_t& x) { return x * 31 + 7; }));
  auto [out, result] = builder.add_output<uint64_t>();
  builder.build([in, out, n](AsyncContext& ctx, Caps caps) mutable {
    std::map<Time, std::vector<uint64_t>> stash;
    CapabilitySet<Time>& held = caps[0];
    auto release = [&](const Antichain<Time>& frontier) {
      while (!stash.empty() && !frontier.less_equal(stash.begin()->first)) {
        Capability<Time> cap = held.delayed(stash.begin()->first);
        for (uint64_t x : stash.begin()->second) out.give(cap, x);
        stash.erase(stash.begin());
      }
      std::vector<Time> hold(frontier.begin(), frontier.end());
      if (!stash.empty() && (hold.empty() || stash.begin()->first < hold[0]))
        hold = {stash.begin()->first};
      held.downgrade(hold);
    };
    for (;;) {
      auto event = in.next();
      if (auto* data = event.data()) {
        for (uint64_t x : data->batch) stash[data->time() + x % n.p].push_back(x);
        if (data->batch.size() % 3 == 0) ctx.yield();
      } else if (const auto* progress = event.progress()) {
        release(progress->frontier);
      } else {
        release(Antichain<Time>());
        return;
      }
    }
  });
  return result;
}
// ---- end of async operator nodes ----

inline Outcome run_worker(Worker& worker, const Spec& spec, uint64_t seed) {
  Outcome outcome;
  outcome.streams.resize(spec.nodes.size());
  std::vector<InputHandle<Time, uint64_t>> inputs;
  std::vector<std::function<bool()>> probes;  // Inner probes: done at the end?
  worker.dataflow<Time>([&](Scope<Time>& scope) {
    std::vector<Stream<Time, uint64_t>> streams;
    std::optional<Stream<Time, uint64_t>> pending_true;  // A branch's second output, next node.
    std::optional<Stream<Time, uint64_t>> pending_deep;  // A deep node's way out, next node.
    for (size_t i = 0; i < spec.nodes.size(); ++i) {
      const Node& n = spec.nodes[i];
      std::optional<Stream<Time, uint64_t>> s;
      switch (n.kind) {
        case Kind::kInput: {
          auto [handle, stream] = new_input<uint64_t>(scope);
          inputs.push_back(std::move(handle));
          s = stream;
          break;
        }
        case Kind::kMap:
          s = streams[n.a] | map([n](uint64_t x) { return apply_map(n, x); });
          break;
        case Kind::kFilter:
          s = streams[n.a] | filter([n](const uint64_t& x) { return keep(n, x); });
          break;
        case Kind::kExchange:
          s = streams[n.a] |
              exchange([](const uint64_t& x) { return x * 0x9e3779b97f4a7c15ULL >> 7; });
          break;
        case Kind::kConcat:
          s = streams[n.a] | concat(streams[n.b]);
          break;
        case Kind::kDelay:
          s = streams[n.a] |
              delay([n](const uint64_t& x, const Time& t) { return delayed(n, t, x); });
          break;
        case Kind::kBranchFalse:
        case Kind::kBranchTrue: {
          if (n.kind == Kind::kBranchFalse) {
            auto [no, yes] = streams[n.a] | branch([n](const Time&, const uint64_t& x) {
                               return branch_pred(n, x);
                             });
            s = no;
            pending_true = yes;
          } else {
            s = *pending_true;
          }
          break;
        }
        case Kind::kLoop: {
          auto [loop, cycle] = feedback<uint64_t>(scope, IntSummary<Time>{1});
          auto entry = streams[n.a] | concat(cycle);
          auto body = entry | map([](uint64_t x) { return x / 2; });
          if (n.p == 1) body = body | exchange([](const uint64_t& x) { return x; });
          auto [done, again] = body | branch([](const Time&, const uint64_t& x) { return x > 0; });
          again | connect_loop(loop);
          s = entry;
          break;
        }
        case Kind::kNestedLoop: {
          using P = Product<Time, uint64_t>;
          s = scope.iterative<uint64_t>([&](auto& inner) {
            auto [loop, cycle] = loop_variable<uint64_t>(inner, uint64_t{1});
            auto entry = inner.enter(streams[n.a]) | concat(cycle);
            auto checked = unary_frontier<uint64_t>(
                entry, Pipeline{}, "InnerCheck", [&](Capability<P>, OperatorInfo) {
                  return [&](auto& input, auto& output) {
                    input.for_each([&](const InputCapability<P>& cap, std::vector<uint64_t>& data) {
                      if (!input.frontier().less_equal(cap.time())) ++outcome.violations;
                      output.session(cap).give_vec(data);
                    });
                  };
                });
            auto body = checked | map([](uint64_t x) { return x / 2; });
            if (n.p == 1) body = body | exchange([](const uint64_t& x) { return x; });
            auto [done, again] = body | branch([](const P&, const uint64_t& x) { return x > 0; });
            again | connect_loop(loop);
            return inner.leave(checked);
          });
          break;
        }
        case Kind::kAsync:
          s = async_node(streams[n.a], n);
          break;
        case Kind::kKeep:
          s = keep_node(streams[n.a]);
          break;
        case Kind::kDeepInner: {
          DeepContext ctx{&n, worker.index(), &outcome.streams[i], &outcome.violations, &probes};
          auto left = deep_level<0>(scope, streams[n.a], ctx);
          pending_deep = left ? *left : streams[n.a];
          streams.push_back(streams[n.a]);  // Never used: no node takes this one as upstream.
          continue;
        }
        case Kind::kDeepOut:
          s = *pending_deep;
          break;
        case Kind::kRegion:
          s = scope.region([&](auto& inner) {
            return inner.leave(inner.enter(streams[n.a]) |
                               map([n](uint64_t x) { return apply_map(n, x); }) |
                               exchange([](const uint64_t& x) { return x; }));
          });
          break;
      }
      streams.push_back(check(*s, &outcome.streams[i], &outcome.violations));
    }
  });

  // Feed the inputs with random step interleavings.
  std::mt19937_64 rng(seed * 1000003 + worker.index());
  const auto& mine = spec.inputs[worker.index()];
  std::vector<size_t> next(mine.size(), 0);
  for (;;) {
    std::vector<size_t> open;
    for (size_t i = 0; i < mine.size(); ++i) {
      if (next[i] < mine[i].size()) open.push_back(i);
    }
    if (open.empty()) break;
    const size_t i = open[rng() % open.size()];
    const auto [t, x] = mine[i][next[i]++];
    if (inputs[i].time() < t) inputs[i].advance_to(t);
    inputs[i].send(x);
    for (uint64_t k = rng() % 4; k > 0; --k) worker.step();
    if (rng() % 8 == 0) inputs[i].flush();
  }
  for (auto& input : inputs) {
    for (uint64_t k = rng() % 3; k > 0; --k) worker.step();
    input.close();
  }
  while (worker.step_or_park(std::chrono::milliseconds(1))) {
  }
  for (const auto& done : probes) {
    if (!done()) ++outcome.violations;
  }
  return outcome;
}

}  // namespace weir::testing::random_dataflow
