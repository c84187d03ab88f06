// The Consensus implementations behind Consensus::open.

#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "weir/persist/consensus.h"

namespace weir::persist::internal {

// InvalidArgument unless new_seqno == expected_seqno.value_or(0) + 1.
absl::Status check_next_seqno(std::string_view key, std::optional<uint64_t> expected_seqno,
                              uint64_t new_seqno);

// In memory. `name` non-empty: the store shared by every open of that name in this process.
std::unique_ptr<Consensus> open_mem_consensus(const std::string& name);

// One SQLite database file, created if absent. An operation waits at most `busy_timeout` for
// another process's write lock.
absl::StatusOr<std::unique_ptr<Consensus>> open_sqlite_consensus(
    const std::string& path, absl::Duration busy_timeout = absl::Seconds(60));

// A libpq connection string or URL.
absl::StatusOr<std::unique_ptr<Consensus>> open_postgres_consensus(const std::string& url);

}  // namespace weir::persist::internal
