// Splitting store URLs: "scheme://rest".

#pragma once

#include <optional>
#include <string_view>

namespace weir::persist::internal {

struct Url {
  std::string_view scheme;  // Before "://".
  std::string_view rest;    // After "://".
};

// nullopt if `url` has no "://".
std::optional<Url> split_url(std::string_view url);

}  // namespace weir::persist::internal
