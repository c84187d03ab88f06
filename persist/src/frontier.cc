#include "weir/persist/frontier.h"

#include <string>

namespace weir::persist {

std::string Frontier::to_string() const {
  return is_empty() ? "[]" : "[" + std::to_string(time()) + "]";
}

}  // namespace weir::persist
