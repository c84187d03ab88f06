#include "weir/control/validate.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "codec.h"

#include "weir/status.h"

namespace weir::control {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_name_char(char c) { return is_name_start(c) || c == '_' || c == '.' || c == '-'; }

std::string quoted(std::string_view name) {
  return absl::StrCat("\"", absl::CEscape(absl::string_view(name.data(), name.size())), "\"");
}

const char* kind_of(const ObjectSpec& spec) {
  static constexpr const char* kKinds[] = {"source", "view", "hold"};
  return kKinds[spec.index()];
}

// The checks of each kind of object. Only that the spec names what it is, so far; later commits add
// here: source options parsed as `weir ingest` parses them (and a table prefix no other live source
// uses), view inputs that exist and an output no other object writes, holds on shards that exist
// with a (reader, shard) pair no other hold has.
absl::Status validate_spec(std::string_view name, const SourceSpec& spec, const CatalogSnapshot&) {
  if (spec.source.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("source ", quoted(name), " names no source"));
  }
  return absl::OkStatus();
}

absl::Status validate_spec(std::string_view name, const ViewSpec& spec, const CatalogSnapshot&) {
  if (spec.view.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("view ", quoted(name), " names no view"));
  }
  return absl::OkStatus();
}

absl::Status validate_spec(std::string_view name, const HoldSpec& spec, const CatalogSnapshot&) {
  if (spec.shard.empty() || spec.reader.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold ", quoted(name), " needs both a shard and a reader"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status validate_name(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("a catalog object needs a name");
  }
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("catalog name ", quoted(name), " has ",
                                                   name.size(), " characters; at most ",
                                                   kMaxNameLength, " are allowed"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!(i == 0 ? is_name_start(name[i]) : is_name_char(name[i]))) {
      return absl::InvalidArgumentError(absl::StrCat("catalog name ", quoted(name), " has ",
                                                     quoted(name.substr(i, 1)), " at position ", i,
                                                     ": names match [a-z0-9][a-z0-9_.-]*"));
    }
  }
  if (name.starts_with("weir.")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "catalog name ", quoted(name), " is reserved: names starting with \"weir.\" are weir's"));
  }
  return absl::OkStatus();
}

absl::Status validate(const Change& change, const CatalogSnapshot& catalog) {
  WEIR_RETURN_IF_ERROR(validate_name(change.name));
  const CatalogObject* live = catalog.find(change.name);
  switch (change.kind) {
    case ChangeKind::kCreate:
      if (live != nullptr) {
        return absl::AlreadyExistsError(absl::StrCat("catalog object ", quoted(change.name),
                                                     " exists already (created by version ",
                                                     live->created_version, ")"));
      }
      break;
    case ChangeKind::kDrop:
    case ChangeKind::kReplace:
      if (live == nullptr) {
        return absl::NotFoundError(absl::StrCat("there is no catalog object ", quoted(change.name),
                                                " (at version ", catalog.version, ")"));
      }
      if (change.kind == ChangeKind::kDrop) {
        return absl::OkStatus();
      }
      if (live->spec.index() != change.spec.index()) {
        return absl::InvalidArgumentError(
            absl::StrCat("catalog object ", quoted(change.name), " is a ", kind_of(live->spec),
                         "; a replace cannot make it a ", kind_of(change.spec)));
      }
      if (internal::canonical(live->spec) == internal::canonical(change.spec)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replacing catalog object ", quoted(change.name), " would change nothing"));
      }
      break;
  }
  return std::visit([&](const auto& spec) { return validate_spec(change.name, spec, catalog); },
                    change.spec);
}

}  // namespace weir::control
