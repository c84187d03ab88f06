// Fresh, empty persist stores for tests.

#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "weir/persist/config.h"
#include "weir/persist/consensus.h"

namespace weir::persist::testing {

// A fresh directory, removed when the test binary exits.
std::string temp_dir();

// The URL of the test PostgreSQL server (from WEIR_TEST_POSTGRES_URL, or the file named by
// WEIR_TEST_POSTGRES_URL_FILE, which the CTest fixture `postgres` writes). Fails the current test
// and returns "" if neither is set.
std::string postgres_url();

// A consensus URL in a fresh schema of the test PostgreSQL server.
std::string fresh_postgres_consensus_url();

// A fresh empty store:
//   "mem"       mem://<unique> blob and consensus
//   "sqlite"    a file blob and a SQLite consensus in a fresh directory
//   "postgres"  a file blob in a fresh directory and a PostgreSQL consensus in a fresh schema
PersistLocation fresh_location(const std::string& kind);

// A consensus store that fails: while `fail_next`, a compare_and_set fails before reaching the
// store; while `lose_replies`, one goes through and then reports Unavailable; while `down`, every
// call fails before reaching the store.
class LosingConsensus final : public Consensus {
 public:
  explicit LosingConsensus(std::shared_ptr<Consensus> inner) : inner_(std::move(inner)) {}
  std::atomic<int> fail_next{0};     // How many compare_and_sets fail before the store.
  std::atomic<int> lose_replies{0};  // How many replies to lose.
  std::atomic<bool> down{false};
  std::atomic<bool> down_after_losing{false};  // Goes down once it has lost the replies.
  std::function<void()> on_lost_reply;         // Runs after each commit whose reply it loses.

  absl::StatusOr<std::optional<VersionedData>> head(std::string_view key) override {
    if (down) return absl::UnavailableError("consensus is down (test)");
    return inner_->head(key);
  }
  absl::StatusOr<CasResult> compare_and_set(std::string_view key,
                                            std::optional<uint64_t> expected_seqno,
                                            const VersionedData& new_version) override {
    if (down) return absl::UnavailableError("consensus is down (test)");
    if (fail_next.load() > 0) {
      --fail_next;
      return absl::UnavailableError("the call failed (test)");
    }
    absl::StatusOr<CasResult> result = inner_->compare_and_set(key, expected_seqno, new_version);
    if (result.ok() && lose_replies.load() > 0) {
      if (--lose_replies == 0 && down_after_losing) down = true;
      if (on_lost_reply) on_lost_reply();
      return absl::UnavailableError("the reply was lost (test)");
    }
    return result;
  }
  absl::StatusOr<std::vector<VersionedData>> scan(std::string_view key, uint64_t from_seqno,
                                                  size_t limit) override {
    if (down) return absl::UnavailableError("consensus is down (test)");
    return inner_->scan(key, from_seqno, limit);
  }
  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override {
    if (down) return absl::UnavailableError("consensus is down (test)");
    return inner_->truncate(key, seqno);
  }

 private:
  std::shared_ptr<Consensus> inner_;
};

}  // namespace weir::persist::testing
