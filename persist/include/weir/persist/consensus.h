// Consensus: a linearizable store of versioned values, where persist keeps each shard's state.
//
// Each key holds a sequence of versions numbered by seqno. Versions are only ever added with
// compare_and_set, which succeeds for exactly one of any number of concurrent callers that
// expect the same head; that single primitive decides every race between writers of a shard.
// Old versions stay readable until truncate removes them.
//
// Seqnos: the first version of a key is 1 and every next one is the head's seqno + 1.
//
// Thread safety: implementations are thread-safe, and SQLite and PostgreSQL stores are safe to
// share between processes (PostgreSQL also between hosts).

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir::persist {

struct VersionedData {
  uint64_t seqno = 0;
  std::string data;
};

enum class CasResult {
  kCommitted,
  kExpectationMismatch,  // The head was not the expected one; nothing was written.
};

class Consensus {
 public:
  // Opens a store by URL:
  //   sqlite:///abs/path/consensus.db   one SQLite file (created if absent), WAL mode, fsync on
  //                                     every commit; safe for many processes on one host.
  //   postgres://... or postgresql://...  a libpq connection URL; the table "consensus" is
  //                                     created if absent. Add ?options=-csearch_path%3DNAME to
  //                                     keep several stores apart in one database, and
  //                                     operation_timeout=SECONDS (default 30) to bound each
  //                                     round trip (docs/persist.md).
  //   mem://  or  mem://NAME            in memory, for tests (NAME: shared in this process).
  static absl::StatusOr<std::unique_ptr<Consensus>> open(std::string_view url);

  virtual ~Consensus() = default;

  // The latest version of `key`, or nullopt if it has none.
  virtual absl::StatusOr<std::optional<VersionedData>> head(std::string_view key) = 0;

  // Adds `new_version` if the head of `key` has seqno `expected_seqno` (nullopt: `key` has no
  // version). REQUIRES: new_version.seqno == expected_seqno.value_or(0) + 1 (else
  // InvalidArgument).
  virtual absl::StatusOr<CasResult> compare_and_set(std::string_view key,
                                                    std::optional<uint64_t> expected_seqno,
                                                    const VersionedData& new_version) = 0;

  // Up to `limit` versions of `key` with seqno >= `from_seqno`, in seqno order.
  virtual absl::StatusOr<std::vector<VersionedData>> scan(std::string_view key, uint64_t from_seqno,
                                                          size_t limit) = 0;

  // Deletes every version of `key` with seqno < `seqno` and returns how many were deleted.
  // FailedPrecondition if `seqno` is beyond the head: the head is never deleted.
  virtual absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) = 0;
};

}  // namespace weir::persist
