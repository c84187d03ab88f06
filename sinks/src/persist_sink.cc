#include "weir/sinks/persist_sink.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"

#include "weir/operators/feedback.h"
#include "weir/status.h"

namespace weir::sinks {

using persist::Batch;
using persist::Frontier;

namespace {
// Moves `from`'s parts to the end of `into`'s, run after run.
void append_runs(Batch& into, Batch& from) {
  if (from.parts.empty()) return;
  if (!into.parts.empty()) into.run_starts.push_back(static_cast<uint32_t>(into.parts.size()));
  const uint32_t base = static_cast<uint32_t>(into.parts.size());
  for (uint32_t start : from.run_starts) into.run_starts.push_back(base + start);
  for (auto& part : from.parts) into.parts.push_back(std::move(part));
}
}  // namespace

absl::StatusOr<Batch> merge_batches(std::vector<Batch> batches) {
  if (batches.empty()) return absl::InvalidArgumentError("no batches to merge");
  Batch merged = std::move(batches[0]);
  for (size_t i = 1; i < batches.size(); ++i) {
    Batch& b = batches[i];
    if (b.shard_id != merged.shard_id || b.writer_id != merged.writer_id ||
        !(b.description == merged.description)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot merge batches of different shards, writers or descriptions (",
                       merged.writer_id, " vs ", b.writer_id, ")"));
    }
    append_runs(merged, b);
  }
  return merged;
}

absl::StatusOr<Batch> concat_batches(std::vector<Batch> batches) {
  if (batches.empty()) return absl::InvalidArgumentError("no batches to concatenate");
  Batch joined = std::move(batches[0]);
  for (size_t i = 1; i < batches.size(); ++i) {
    Batch& b = batches[i];
    if (b.shard_id != joined.shard_id || b.writer_id != joined.writer_id ||
        b.description.lower != joined.description.upper ||
        b.description.since != joined.description.since) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot concatenate batches of different shards or writers, or that do not follow "
          "each other ([",
          joined.description.lower.to_string(), ", ", joined.description.upper.to_string(),
          ") then [", b.description.lower.to_string(), ", ", b.description.upper.to_string(), ")"));
    }
    joined.description.upper = b.description.upper;
    // The last one's token: unique, and no batch is appended with it but this one.
    joined.idempotency_token = std::move(b.idempotency_token);
    append_runs(joined, b);
  }
  return joined;
}

namespace {

using Description = std::pair<Time, Time>;  // [lower, upper)

// write: outputs 0 (batches, encoded, at their description's lower) and 1 (a marker with no
// records whose frontier is the input's: what mint watches).
std::pair<Stream<Time, std::string>, Stream<Time, uint8_t>> render_write(
    const Stream<Time, Update>& updates, const Stream<Time, Description>& descriptions,
    const PersistSinkConfig& config, RenderedSink& rendered) {
  AsyncOperatorBuilder<Time> builder("PersistWrite(" + config.name + ")", updates.scope());
  auto data = builder.add_input_connected(updates, Pipeline{}, std::vector<uint32_t>{0, 1});
  auto described = builder.add_input_connected(descriptions, Broadcast{}, std::vector<uint32_t>{0});
  auto [batch_out, batches] = builder.add_output<std::string>();
  auto [marker_out, marker] = builder.add_output<uint8_t>();
  builder.set_on_error(OnError::kHold);
  auto built = builder.build([=](AsyncContext& ctx,
                                 std::span<CapabilitySet<Time>> caps) mutable -> absl::Status {
    Time lower = config.shard_upper;
    Capability<Time> batch_cap = caps[0].delayed(lower);
    caps[0].clear();
    caps[1].downgrade(Antichain<Time>{lower});
    // Shared with the blocking calls that use it: a call still running when the operator is
    // dropped (a blob store that stopped answering) keeps the builder alive on its own.
    std::shared_ptr<persist::BatchBuilder> current;
    std::map<Time, std::vector<Update>>
        later;  // Updates after `lower`, waiting for their description.
    std::deque<Description> queue;
    Antichain<Time> data_frontier{0};
    bool data_done = false, descriptions_done = false;
    auto new_builder = [&] {
      return std::make_shared<persist::BatchBuilder>(config.writer->builder(Frontier(lower)));
    };
    auto add = [&](const std::string& row, Time time, int64_t diff) -> absl::Status {
      if (!current) current = new_builder();
      if (!config.flag_prefix.empty() && config.stats && row.starts_with(config.flag_prefix)) {
        config.stats->note_flagged_row(row);
        config.stats->flagged.store(true, std::memory_order_release);
      }
      // Waiting for an upload blocks: do it off the worker, which has other exports to serve.
      if (current->uploads_full()) {
        if (absl::Status s = ctx.run_blocking_owned([b = current] { return b->wait_for_room(); });
            !s.ok())
          return s;
      }
      return current->add(row, time, diff);
    };
    for (;;) {
      bool progressed = false;
      while (!data_done) {
        auto event = data.try_next();
        if (!event) break;
        progressed = true;
        if (auto* d = event->data()) {
          const Time time = d->time();
          if (time < lower) continue;  // Already in the shard.
          if (time == lower) {
            uint64_t bytes = 0;
            for (const auto& [row, diff] : d->batch) {
              if (absl::Status s = add(row, time, diff); !s.ok()) return s;
              bytes += row.size();
            }
            if (config.stats) {
              config.stats->updates.fetch_add(d->batch.size(), std::memory_order_relaxed);
              config.stats->bytes.fetch_add(bytes, std::memory_order_relaxed);
            }
          } else {
            auto& pending = later[time];
            for (auto& u : d->batch) pending.push_back(std::move(u));
          }
        } else if (const auto* p = event->progress()) {
          data_frontier = p->frontier;
          // An input that starts below the shard's upper (a view reading as of upper - 1)
          // leaves the marker where it is until it passes.
          if (!data_frontier.empty() && *data_frontier.begin() > config.shard_upper) {
            caps[1].downgrade(data_frontier);
          }
        } else {
          data_done = true;
          data_frontier.clear();
          caps[1].clear();
          break;
        }
      }
      while (!descriptions_done) {
        auto event = described.try_next();
        if (!event) break;
        progressed = true;
        if (auto* d = event->data()) {
          for (const auto& description : d->batch) queue.push_back(description);
        } else if (event->is_end()) {
          descriptions_done = true;
          break;
        }
      }
      // Finish batches whose description is known and whose data is all here.
      while (!queue.empty() && queue.front().first == lower &&
             !data_frontier.less_than(queue.front().second)) {
        const Time upper = queue.front().second;
        queue.pop_front();
        for (auto it = later.begin(); it != later.end() && it->first < upper;) {
          uint64_t bytes = 0;
          for (const auto& [row, diff] : it->second) {
            if (absl::Status s = add(row, it->first, diff); !s.ok()) return s;
            bytes += row.size();
          }
          if (config.stats) {
            config.stats->updates.fetch_add(it->second.size(), std::memory_order_relaxed);
            config.stats->bytes.fetch_add(bytes, std::memory_order_relaxed);
          }
          it = later.erase(it);
        }
        if (!current) current = new_builder();
        auto batch = ctx.run_blocking_owned(
            [b = std::move(current), upper] { return b->finish(Frontier(upper)); });
        current.reset();
        if (!batch.ok()) return batch.status();
        batch_out.give(batch_cap, batch->encode());
        lower = upper;
        batch_cap.downgrade(lower);
        progressed = true;
      }
      if (data_done && descriptions_done && queue.empty()) break;
      if (!progressed) ctx.suspend();
    }
    if (current) {
      // Updates after the last description: never appended; remove their parts now.
      absl::Status discarded =
          ctx.run_blocking_owned([b = std::move(current)] { return b->discard(); });
      current.reset();
      if (!discarded.ok()) return discarded;
    }
    return absl::OkStatus();
  });
  rendered.errors.push_back(built.errors);
  rendered.buttons.push_back(built.button);
  return {batches, marker};
}

// mint: turns the marker's frontier into descriptions, on the leader.
Stream<Time, Description> render_mint(const Stream<Time, uint8_t>& marker,
                                      const PersistSinkConfig& config, RenderedSink& rendered) {
  AsyncOperatorBuilder<Time> builder("PersistMint(" + config.name + ")", marker.scope());
  auto input = builder.add_input(marker, Pipeline{});
  auto [output, descriptions] = builder.add_output<Description>();
  const bool leader = marker.scope().index() == config.leader % marker.scope().peers();
  auto built = builder.build([=](AsyncContext&, std::span<CapabilitySet<Time>> caps) mutable {
    if (!leader) {
      caps[0].clear();
      return;
    }
    Time lower = config.shard_upper;
    Capability<Time> cap = caps[0].delayed(lower);
    caps[0].clear();
    auto describe = [&](Time upper) {
      if (upper <= lower) return;
      output.give(cap, Description{lower, upper});
      lower = upper;
      cap.downgrade(lower);
    };
    for (;;) {
      auto event = input.next();
      if (const auto* p = event.progress()) {
        if (p->frontier.empty()) break;
        describe(*p->frontier.begin());
      } else if (event.is_end()) {
        break;
      }
    }
    if (config.final_upper) describe(*config.final_upper);
  });
  rendered.buttons.push_back(built.button);
  return descriptions;
}

// Removes the parts of a batch that will not be appended, on the blocking pool. The call owns what
// it uses: a drop does not wait for it.
absl::Status discard_batch(AsyncContext& ctx, std::shared_ptr<persist::WriteHandle> writer,
                           std::shared_ptr<const Batch> batch) {
  return ctx.run_blocking_owned(
      [writer = std::move(writer), batch = std::move(batch)] { return writer->discard(*batch); });
}

// append: compare-and-appends every description's batches, in order, on the leader.
void render_append(const Stream<Time, std::string>& batches, const PersistSinkConfig& config,
                   RenderedSink& rendered) {
  AsyncOperatorBuilder<Time> builder("PersistAppend(" + config.name + ")", batches.scope());
  const size_t leader = config.leader % batches.scope().peers();
  auto input =
      builder.add_input(batches, Exchange([leader](const std::string&) { return leader; }));
  builder.set_on_error(OnError::kHold);
  auto built = builder.build([=](AsyncContext& ctx,
                                 std::span<CapabilitySet<Time>>) mutable -> absl::Status {
    Time expected = config.shard_upper;
    std::map<Time, std::vector<Batch>> pending;  // By description lower.
    // What the appends (blocking calls that own what they use) need of the compaction window:
    // shared, so that an append copies a pointer, not the shard's name.
    struct Window {
      std::shared_ptr<persist::SinceHandle> hold;
      uint64_t epoch;
      uint64_t size;
      std::string shard;
    };
    const auto window =
        config.since_hold
            ? std::make_shared<const Window>(Window{config.since_hold, config.hold_epoch,
                                                    config.compaction_window, config.name})
            : nullptr;
    // The workers' batches of the first ready description, merged into one.
    auto take_ready = [&]() -> absl::StatusOr<Batch> {
      auto node = pending.extract(pending.begin());
      return merge_batches(std::move(node.mapped()));
    };
    auto append_ready = [&](const Antichain<Time>& frontier) -> absl::Status {
      while (!pending.empty() && !frontier.less_equal(pending.begin()->first)) {
        const Time lower = pending.begin()->first;
        auto merged = take_ready();
        if (!merged.ok()) return merged.status();
        Time upper = merged->description.upper.time();
        // The descriptions joined into this append, each merged, when there are several: kept so
        // that an upper mismatch at a boundary between them goes on as appending them one by one
        // would (below).
        std::vector<Batch> run;
        if (expected == lower) {
          // The ready descriptions that follow go into the same append: an append is a consensus
          // write (an fsync), and one per description falls behind a source that moves its
          // frontier more often than that.
          run.push_back(*std::move(merged));
          while (!pending.empty() && !frontier.less_equal(pending.begin()->first) &&
                 pending.begin()->first == upper) {
            auto next = take_ready();
            if (!next.ok()) return next.status();
            upper = next->description.upper.time();
            run.push_back(*std::move(next));
          }
          if (run.size() == 1) {
            merged = std::move(run.front());
            run.clear();
          } else {
            merged = concat_batches(run);
          }
          if (!merged.ok()) return merged.status();
        }
        // The calls below own what they use: one still running when the operator is dropped
        // (consensus or blob stopped answering) is left to return on its own; a late
        // compare-and-append is fenced by its expected upper (docs/design/sinks.md).
        auto batch = std::make_shared<const Batch>(std::move(*merged));
        if (expected >= upper) {
          // Another incarnation already appended this range: ours is redundant.
          if (absl::Status s = discard_batch(ctx, config.writer, batch); !s.ok()) return s;
          continue;
        }
        if (expected != lower) {
          return absl::AbortedError(absl::StrCat("shard ", config.name, ": upper is ", expected,
                                                 ", a batch [", lower, ", ", upper,
                                                 ") cannot follow it"));
        }
        auto result = ctx.run_blocking_owned([writer = config.writer, batch, lower, upper,
                                              window]() -> absl::StatusOr<persist::AppendResult> {
          auto appended = writer->compare_and_append(*batch, Frontier(lower), Frontier(upper));
          if (appended.ok() && appended->is_appended() && appended->maintenance_due && window) {
            // Before the maintenance this append asks for, so that it compacts up to the
            // new since.
            WEIR_RETURN_IF_ERROR(downgrade_to_window(*window->hold, window->epoch, upper,
                                                     window->size, window->shard));
          }
          return appended;
        });
        if (!result.ok()) return result.status();
        if (!result->is_appended()) {
          const Frontier current = result->mismatch->current;
          if (!current.is_empty() && current.time() >= upper) {
            // Another writer's rows, perhaps an error row this sink's input does not have: the
            // driver must not take the shard's definite error from its plan (see flagged).
            if (!config.flag_prefix.empty() && config.stats) {
              config.stats->flagged.store(true, std::memory_order_release);
            }
            expected = current.time();
            if (absl::Status s = discard_batch(ctx, config.writer, batch); !s.ok()) return s;
            continue;
          }
          // Another writer appended the first few of the joined descriptions: theirs are
          // discarded (as above) and the rest go back to be appended from its upper. The mismatch
          // is definite (compare_and_append looked for this append's token first), so appending
          // them again, with the same last token, cannot append anything twice.
          const auto rest = std::find_if(run.begin(), run.end(), [&](const Batch& b) {
            return !current.is_empty() && b.description.lower == current;
          });
          if (rest != run.begin() && rest != run.end()) {
            if (!config.flag_prefix.empty() && config.stats) {
              config.stats->flagged.store(true, std::memory_order_release);
            }
            auto covered = concat_batches(std::vector<Batch>(std::make_move_iterator(run.begin()),
                                                             std::make_move_iterator(rest)));
            if (!covered.ok()) return covered.status();
            for (auto it = rest; it != run.end(); ++it) {
              pending[it->description.lower.time()].push_back(std::move(*it));
            }
            expected = current.time();
            absl::Status discarded = discard_batch(
                ctx, config.writer, std::make_shared<const Batch>(*std::move(covered)));
            if (!discarded.ok()) return discarded;
            continue;
          }
          return absl::AbortedError(
              absl::StrCat("shard ", config.name, ": upper mismatch: expected ", lower, ", found ",
                           current.to_string(), "; restarting from the shard's upper"));
        }
        expected = upper;
        if (result->maintenance_due && config.maintenance) {
          config.maintenance->request(config.name);
        }
        if (config.stats) {
          if (upper > config.shard_upper && config.stats->first_advance_ns.load() == 0) {
            config.stats->first_advance_ns.store(
                std::chrono::steady_clock::now().time_since_epoch().count());
          }
          config.stats->persisted_upper.store(upper, std::memory_order_relaxed);
          config.stats->batches.fetch_add(1, std::memory_order_relaxed);
        }
      }
      return absl::OkStatus();
    };
    for (;;) {
      auto event = input.next();
      if (auto* d = event.data()) {
        for (const auto& bytes : d->batch) {
          auto batch = Batch::decode(bytes);
          if (!batch.ok()) return batch.status();
          pending[d->time()].push_back(std::move(*batch));
        }
      } else if (const auto* p = event.progress()) {
        if (absl::Status s = append_ready(p->frontier); !s.ok()) return s;
      } else {
        return append_ready(Antichain<Time>());
      }
    }
  });
  rendered.errors.push_back(built.errors);
  rendered.buttons.push_back(built.button);
}

}  // namespace

absl::Status downgrade_to_window(persist::SinceHandle& hold, uint64_t epoch, Time upper,
                                 uint64_t window, const std::string& shard) {
  const Time since = window_since(upper, window);
  if (hold.epoch() == epoch && !hold.since().is_empty() && hold.since().time() >= since) {
    return absl::OkStatus();  // Nothing to move (and no consensus write).
  }
  WEIR_ASSIGN_OR_RETURN(const persist::SinceResult result,
                        hold.compare_and_downgrade_since(epoch, epoch, Frontier(since)));
  if (result.mismatch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", shard, ": its compaction window's since hold is held by incarnation ",
        result.mismatch->current, ", not by this one (", epoch,
        "): a later incarnation has taken over"));
  }
  return absl::OkStatus();
}

RenderedSink render_persist_sink(const Stream<Time, Update>& updates,
                                 const PersistSinkConfig& config) {
  RenderedSink rendered;
  // write needs mint's descriptions and mint watches write's marker: the descriptions come back
  // through a feedback edge of summary 0 (a forward reference; there is no cycle in progress,
  // since write's description input does not reach its marker output).
  auto [loop, descriptions] = feedback<Description>(updates.scope(), IntSummary<Time>{0});
  auto [batches, marker] = render_write(updates, descriptions, config, rendered);
  render_mint(marker, config, rendered) | connect_loop(loop);
  render_append(batches, config, rendered);
  return rendered;
}

}  // namespace weir::sinks
