#include "url.h"

namespace weir::persist::internal {

std::optional<Url> split_url(std::string_view url) {
  const size_t pos = url.find("://");
  if (pos == std::string_view::npos || pos == 0) {
    return std::nullopt;
  }
  return Url{url.substr(0, pos), url.substr(pos + 3)};
}

}  // namespace weir::persist::internal
