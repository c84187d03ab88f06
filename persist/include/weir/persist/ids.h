// Identifiers of shards, writers and readers: a one-letter kind followed by a random UUID, e.g.
// "s0c8f0b1e-5d6e-4f0a-9b1c-2d3e4f5a6b7c".
//
// A ShardId is the durable identity of a shard; its human-readable name maps to it (see
// PersistClient). A CriticalReaderId is chosen once by the owner of a critical since hold and
// stored by it, so that the hold survives restarts.
//
// Thread safety: value types with no internal synchronization.

#pragma once

#include <compare>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace weir::persist {

namespace internal {
// "<kind><uuid>" with a fresh random version-4 UUID.
std::string random_id(char kind);
// True if `id` is "<kind><uuid>".
bool is_valid_id(char kind, std::string_view id);
}  // namespace internal

template <char kKind>
class PrefixedId {
 public:
  // The empty id: a placeholder that parse() and random() never return.
  PrefixedId() = default;

  static PrefixedId random() { return PrefixedId(internal::random_id(kKind)); }

  // Accepts exactly the form random() produces.
  static absl::StatusOr<PrefixedId> parse(std::string_view text) {
    if (!internal::is_valid_id(kKind, text)) {
      return absl::InvalidArgumentError(std::string("not a valid id of kind '") + kKind + "': \"" +
                                        std::string(text) + "\"");
    }
    return PrefixedId(std::string(text));
  }

  const std::string& str() const { return value_; }

  friend bool operator==(const PrefixedId&, const PrefixedId&) = default;
  friend auto operator<=>(const PrefixedId&, const PrefixedId&) = default;

 private:
  explicit PrefixedId(std::string value) : value_(std::move(value)) {}

  std::string value_;
};

using ShardId = PrefixedId<'s'>;
using CriticalReaderId = PrefixedId<'c'>;

}  // namespace weir::persist
