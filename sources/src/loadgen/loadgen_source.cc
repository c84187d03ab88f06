#include "weir/sources/loadgen/loadgen_source.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"

#include "weir/mutex.h"
#include "weir/operators/concat.h"
#include "weir/operators/exchange.h"

namespace weir::sources::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

// Builds the snapshot operator: outputs 0..n-1 are the exports, output n is health.
void render_snapshot(Scope<Offset>& scope, const LoadgenSourceConfig& config,
                     const loadgen::Generator& generator, const std::vector<ExportSpec>& exports,
                     const std::vector<uint32_t>& tables, std::vector<Stream<Offset, Update>>& outs,
                     std::vector<Stream<Offset, HealthUpdate>>& health,
                     std::vector<Stream<Offset, AsyncError>>& errors,
                     std::vector<ShutdownButton>& buttons) {
  AsyncOperatorBuilder<Offset> builder("LoadgenSnapshot", scope);
  auto [outputs, health_out] = add_source_outputs(builder, exports.size(), outs, health);
  const size_t worker = scope.index(), peers = scope.peers();
  auto built = builder.build([=](AsyncContext&, std::span<CapabilitySet<Offset>> caps) mutable {
    const size_t n = exports.size();
    std::optional<Capability<Offset>> health_cap(caps[n].first());
    caps[n].clear();
    std::vector<size_t> snapshotting;
    // The snapshot's slot of every export on this worker (the replication has its own): starting
    // until its share is out, or running at once when there is nothing to snapshot.
    auto report = [&](size_t e, Health status) {
      HealthUpdate update{static_cast<uint32_t>(e), static_cast<uint32_t>(worker), status, ""};
      update.snapshot = true;
      health_out.give(*health_cap, std::move(update));
    };
    for (size_t e = 0; e < n; ++e) {
      if (exports[e].needs_snapshot()) {
        snapshotting.push_back(e);
        if (config.stats) config.stats->set_snapshot_total(e, generator.snapshot_rows(tables[e]));
        report(e, Health::kStarting);
      } else {
        report(e, Health::kRunning);
        // Nothing to snapshot: this export follows the replication at once.
        if (config.mode == ProgressMode::kConcurrent) caps[e].clear();
      }
    }
    for (size_t e : snapshotting) {
      const uint64_t rows = generator.snapshot_rows(tables[e]);
      Capability<Offset> cap = caps[e].first();
      auto session = outputs[e].session(cap);
      uint64_t given = 0;
      for (uint64_t id = worker; id < rows; id += peers) {
        session.give(Update{generator.initial_row(tables[e], id), 1});
        if (++given == 1024) {
          if (config.stats) config.stats->add_snapshot_rows(e, given);
          given = 0;
        }
      }
      if (config.stats) config.stats->add_snapshot_rows(e, given);
      report(e, Health::kRunning);
      if (config.mode == ProgressMode::kConcurrent) caps[e].clear();
    }
    for (size_t e = 0; e < n; ++e) caps[e].clear();
  });
  errors.push_back(built.errors);
  buttons.push_back(built.button);
}

std::string undecodable(const std::string& table, Offset offset) {
  return absl::StrCat("table ", table, ": undecodable row at offset ", offset);
}

// Builds the replication operator: outputs 0..n-1 are the exports, output n is health.
void render_replication(Scope<Offset>& scope, const LoadgenSourceConfig& config,
                        const loadgen::Generator& generator, const std::vector<ExportSpec>& exports,
                        const std::vector<uint32_t>& tables,
                        std::vector<Stream<Offset, Update>>& outs,
                        std::vector<Stream<Offset, HealthUpdate>>& health,
                        std::vector<Stream<Offset, AsyncError>>& errors,
                        std::vector<ShutdownButton>& buttons) {
  AsyncOperatorBuilder<Offset> builder("LoadgenReplication", scope);
  auto [outputs, health_out] = add_source_outputs(builder, exports.size(), outs, health);
  const bool leader = scope.index() == config.leader % scope.peers();
  const uint32_t worker = static_cast<uint32_t>(scope.index());
  const uint32_t peers = static_cast<uint32_t>(scope.peers());
  auto built = builder.build([=](AsyncContext& ctx,
                                 std::span<CapabilitySet<Offset>> caps) mutable -> absl::Status {
    const size_t n = exports.size();
    // Every worker runs the generator over every offset (its state is cheap to advance) and
    // emits the changes of the offsets it owns, offset % peers: the rows, their encoding and
    // their writing are shared among the workers.
    auto owns = [&](Offset offset) { return offset % peers == worker; };
    const std::vector<bool> none;
    loadgen::Generator gen = generator;
    // Where each export resumes: after its snapshot (time 0), or at its shard's upper.
    std::vector<Offset> resume(n);
    Offset start = std::numeric_limits<Offset>::max();
    std::vector<bool> wanted(gen.num_tables(), false);
    std::vector<std::vector<size_t>> exports_of(gen.num_tables());
    for (size_t e = 0; e < n; ++e) {
      resume[e] = std::max<Offset>(exports[e].resume_upper, 1);
      start = std::min(start, resume[e]);
      wanted[tables[e]] = true;
      exports_of[tables[e]].push_back(e);
    }
    if (n == 0) start = 1;
    std::vector<std::optional<Capability<Offset>>> held(n);
    for (size_t e = 0; e < n; ++e) {
      held[e].emplace(caps[e].delayed(resume[e]));
      caps[e].clear();
    }
    std::optional<Capability<Offset>> health_cap(caps[n].delayed(start));
    caps[n].clear();
    gen.skip_to(start);
    std::vector<bool> errored(n, false);
    for (size_t e = 0; e < n; ++e) {
      errored[e] = !exports[e].definite_error.empty();
      health_out.give(*health_cap,
                      errored[e]
                          ? HealthUpdate{static_cast<uint32_t>(e), worker, Health::kStalled,
                                         exports[e].definite_error}
                          : HealthUpdate{static_cast<uint32_t>(e), worker, Health::kRunning, ""});
    }
    const auto t0 = Clock::now();
    const Offset o0 = gen.next_offset();
    std::vector<loadgen::RowChange> changes;
    const Offset end = config.until ? *config.until + 1 : std::numeric_limits<Offset>::max();
    constexpr Offset kChunk = 4096;  // Offsets generated between yields at most.
    auto downgrade_all = [&](Offset to) {
      for (size_t e = 0; e < n; ++e) {
        if (held[e]->time() < to) held[e]->downgrade(to);
      }
      if (health_cap->time() < to) health_cap->downgrade(to);
    };
    while (gen.next_offset() < end) {
      Offset allowed = end;
      if (config.rate > 0) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        allowed = std::min<Offset>(end, o0 + static_cast<Offset>(elapsed * config.rate));
      }
      allowed = std::min(allowed, gen.next_offset() + kChunk);
      if (allowed <= gen.next_offset()) {
        // Caught up with the upstream: wait for the next offset to exist.
        downgrade_all(gen.next_offset());
        const auto due =
            t0 + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>((gen.next_offset() + 1 - o0) / config.rate));
        ctx.sleep_until(due);
        continue;
      }
      while (gen.next_offset() < allowed) {
        const Offset offset = gen.next_offset();
        const bool mine = owns(offset);
        if (mine && config.transient_fault && offset == *config.transient_fault &&
            !config.transient_fired->exchange(true)) {
          return absl::UnavailableError(
              absl::StrCat("loadgen: injected transient fault at offset ", offset));
        }
        changes.clear();
        const uint32_t table = gen.table_at(offset);
        const bool bad = gen.step(mine ? wanted : none, changes);
        if (!mine && bad) {
          // Another worker emits the error; this one stops the export's data here too.
          for (size_t e : exports_of[table]) {
            if (offset < resume[e] || errored[e]) continue;
            errored[e] = true;
            health_out.give(*health_cap,
                            HealthUpdate{static_cast<uint32_t>(e), worker, Health::kStalled,
                                         undecodable(exports[e].table, offset)});
          }
        }
        for (auto& change : changes) {
          for (size_t e : exports_of[change.table]) {
            if (offset < resume[e] || errored[e]) continue;
            if (held[e]->time() < offset) held[e]->downgrade(offset);
            if (change.bad) {
              const std::string message = undecodable(exports[e].table, offset);
              outputs[e].give(*held[e], Update{definite_error(message), 1});
              errored[e] = true;
              health_out.give(*health_cap, HealthUpdate{static_cast<uint32_t>(e), worker,
                                                        Health::kStalled, message});
            } else {
              outputs[e].give(*held[e], Update{change.row, change.diff});
            }
          }
        }
      }
      if (config.stats && leader)
        config.stats->record_upstream(gen.next_offset() - 1, Clock::now());
      downgrade_all(gen.next_offset());
      ctx.yield();
    }
    downgrade_all(end);
    for (size_t e = 0; e < n; ++e) {
      if (!errored[e])
        health_out.give(*health_cap,
                        HealthUpdate{static_cast<uint32_t>(e), worker, Health::kCeased, ""});
    }
    ctx.yield();  // Let the frontier rest at `end` before the outputs close.
    return absl::OkStatus();
  });
  errors.push_back(built.errors);
  buttons.push_back(built.button);
}

}  // namespace

absl::StatusOr<RenderedSource> render_loadgen(Scope<Offset>& scope,
                                              const LoadgenSourceConfig& config,
                                              const std::vector<ExportSpec>& exports) {
  auto generator = loadgen::Generator::make(config.generator);
  if (!generator.ok()) return generator.status();
  std::vector<uint32_t> tables;
  for (const auto& e : exports) {
    auto table = generator->table_index(e.table);
    if (!table.ok()) return table.status();
    tables.push_back(*table);
  }
  std::vector<Stream<Offset, Update>> snapshot, replication;
  std::vector<Stream<Offset, HealthUpdate>> health;
  std::vector<Stream<Offset, AsyncError>> errors;
  std::vector<ShutdownButton> buttons;
  render_snapshot(scope, config, *generator, exports, tables, snapshot, health, errors, buttons);
  render_replication(scope, config, *generator, exports, tables, replication, health, errors,
                     buttons);
  std::vector<Stream<Offset, Update>> streams;
  for (size_t e = 0; e < exports.size(); ++e)
    streams.push_back(concat(snapshot[e], replication[e]));
  return RenderedSource{std::move(streams), concat(health[0], health[1]), std::move(errors),
                        std::move(buttons)};
}

}  // namespace weir::sources::loadgen
