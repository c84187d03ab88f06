// Hostfiles: one `host:port` per line, one line per process, in process order (timely's
// convention). Blank lines and lines starting with '#' are skipped; surrounding whitespace is
// ignored. IPv6 hosts are written in brackets: `[::1]:4000`.
//
// Thread safety: pure functions.

#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace weir::protocol {

// The addresses listed in `text`; `name` (the file) appears in errors. Error unless there are
// exactly `processes` well-formed addresses, all different.
absl::StatusOr<std::vector<std::string>> parse_hostfile(std::string_view text,
                                                        std::string_view name, size_t processes);

// parse_hostfile on the contents of the file at `path`.
absl::StatusOr<std::vector<std::string>> read_hostfile(const std::string& path, size_t processes);

// True if the host of `address` (a well-formed hostfile line) is a loopback address:
// "localhost", an IPv4 address in 127.0.0.0/8, or the IPv6 [::1]. Any other name is not, even if
// it resolves to one (nothing is looked up).
bool is_loopback(std::string_view address);

// The cluster id used when none is given: "hostfile-" and a 64-bit FNV-1a hash (hex) of the
// addresses, so every process reading the same hostfile derives the same id.
std::string derive_cluster_id(const std::vector<std::string>& addresses);

}  // namespace weir::protocol
