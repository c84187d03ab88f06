#include "hostfile.h"

#include <charconv>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include <arpa/inet.h>
#include <netinet/in.h>

namespace weir::protocol {
namespace {

// Error unless `address` is host:port with a non-empty host and a port in 1..65535.
absl::Status check_address(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError("not host:port");
  }
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']')
      return absl::InvalidArgumentError("unbalanced [ ] around an IPv6 host");
  } else if (host.find(':') != absl::string_view::npos) {
    return absl::InvalidArgumentError("an IPv6 host must be written in brackets, e.g. [::1]:4000");
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port '", port, "' is not in 1..65535"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> parse_hostfile(std::string_view text,
                                                        std::string_view name, size_t processes) {
  const std::string file(name);
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    if (absl::Status status = check_address(line); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("hostfile ", file, " line ", line_number,
                                                     ": '", line, "': ", status.message()));
    }
    if (!seen.insert(std::string(line)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("hostfile ", file, " line ", line_number, ": '", line, "' is listed twice"));
    }
    addresses.emplace_back(line);
  }
  if (addresses.size() != processes) {
    return absl::InvalidArgumentError(absl::StrCat("hostfile ", file, " lists ", addresses.size(),
                                                   " addresses, but -n is ", processes,
                                                   ": it needs one host:port per process"));
  }
  return addresses;
}

absl::StatusOr<std::vector<std::string>> read_hostfile(const std::string& path, size_t processes) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("-n ", processes,
                     " needs a hostfile (-h FILE, one host:port per process), or start the "
                     "processes with weir-launch"));
  }
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read hostfile ", path));
  std::stringstream text;
  text << file.rdbuf();
  return parse_hostfile(text.str(), path, processes);
}

bool is_loopback(std::string_view address) {
  const size_t colon = address.rfind(':');
  std::string host(address.substr(0, colon == std::string_view::npos ? address.size() : colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    in6_addr v6{};
    return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::string derive_cluster_id(const std::vector<std::string>& addresses) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const std::string& address : addresses) {
    for (char c : address + "\n") {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ULL;
    }
  }
  return absl::StrFormat("hostfile-%016x", hash);
}

}  // namespace weir::protocol
