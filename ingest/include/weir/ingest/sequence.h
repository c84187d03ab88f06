// Numbers that only go up, kept in a shard: how ingest numbers its incarnations and a replica its
// executions, so that each start can fence every earlier one.
//
//   WEIR_ASSIGN_OR_RETURN(uint64_t n, take_sequence_number(client, "auction.incarnations",
//       [](uint64_t n) { return absl::StrCat("incarnation=", n); }));
//
// take_sequence_number appends the row `row(n)` at time n, where n is the shard's upper, by
// compare-and-append (upper n to n + 1): every call, in any process, takes a distinct number, each
// greater than every number taken before it returned. Contention is retried (Aborted after 100
// lost races); a number whose append's outcome is unknown may be skipped, never handed out twice.
//
// Thread safety: thread-safe.

#pragma once

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

#include "weir/persist/client.h"

namespace weir::ingest {

absl::StatusOr<uint64_t> take_sequence_number(persist::PersistClient& client,
                                              const std::string& shard,
                                              absl::FunctionRef<std::string(uint64_t)> row);

// "host:pid": this process, as fence owners and sequence rows name it.
std::string process_name();

}  // namespace weir::ingest
