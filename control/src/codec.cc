#include "codec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

#include "weir/control/v1/catalog.pb.h"

namespace weir::control::internal {
namespace {

namespace proto = weir::control::v1;

void to_proto(const SourceSpec& spec, proto::SourceSpec& out) {
  out.set_source(spec.source);
  for (const SourceOption& option : spec.options) {
    proto::Option* entry = out.add_options();
    entry->set_key(option.key);
    entry->set_value(option.value);
  }
  for (const std::string& table : spec.tables) out.add_tables(table);
}

void to_proto(const ViewSpec& spec, proto::ViewSpec& out) {
  out.set_view(spec.view);
  for (const std::string& input : spec.inputs) out.add_inputs(input);
  out.set_output(spec.output);
}

void to_proto(const HoldSpec& spec, proto::HoldSpec& out) {
  out.set_shard(spec.shard);
  out.set_reader(spec.reader);
  out.set_since(spec.since);
}

}  // namespace

ObjectSpec canonical(ObjectSpec spec) {
  if (auto* source = std::get_if<SourceSpec>(&spec)) {
    std::stable_sort(source->options.begin(), source->options.end(),
                     [](const SourceOption& a, const SourceOption& b) { return a.key < b.key; });
  }
  return spec;
}

std::string encode(const CatalogObject& object) {
  proto::CatalogObject row;
  row.set_format_version(kCatalogFormatVersion);
  row.set_name(object.name);
  row.set_object_id(object.object_id);
  row.set_created_version(object.created_version);
  row.set_created_by(object.created_by);
  const ObjectSpec spec = canonical(object.spec);
  if (const auto* source = std::get_if<SourceSpec>(&spec)) {
    to_proto(*source, *row.mutable_source());
  } else if (const auto* view = std::get_if<ViewSpec>(&spec)) {
    to_proto(*view, *row.mutable_view());
  } else {
    to_proto(std::get<HoldSpec>(spec), *row.mutable_hold());
  }
  return row.SerializeAsString();
}

absl::StatusOr<CatalogObject> decode(std::string_view bytes) {
  proto::CatalogObject row;
  if (!row.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat("a row (", bytes.size(), " bytes) does not parse as a catalog object"));
  }
  if (row.format_version() != kCatalogFormatVersion) {
    return absl::DataLossError(absl::StrCat("the row of \"", row.name(), "\" has format version ",
                                            row.format_version(), "; this build reads version ",
                                            kCatalogFormatVersion));
  }
  if (row.name().empty()) {
    return absl::DataLossError("a row has no name");
  }
  CatalogObject object;
  object.name = row.name();
  object.object_id = row.object_id();
  object.created_version = row.created_version();
  object.created_by = row.created_by();
  switch (row.spec_case()) {
    case proto::CatalogObject::kSource: {
      SourceSpec spec;
      spec.source = row.source().source();
      for (const proto::Option& option : row.source().options()) {
        spec.options.push_back({option.key(), option.value()});
      }
      spec.tables.assign(row.source().tables().begin(), row.source().tables().end());
      object.spec = std::move(spec);
      break;
    }
    case proto::CatalogObject::kView:
      object.spec = ViewSpec{
          .view = row.view().view(),
          .inputs = {row.view().inputs().begin(), row.view().inputs().end()},
          .output = row.view().output(),
      };
      break;
    case proto::CatalogObject::kHold:
      object.spec = HoldSpec{
          .shard = row.hold().shard(), .reader = row.hold().reader(), .since = row.hold().since()};
      break;
    case proto::CatalogObject::SPEC_NOT_SET:
      return absl::DataLossError(absl::StrCat("the row of \"", row.name(), "\" has no spec"));
  }
  object.encoded = std::string(bytes);
  return object;
}

}  // namespace weir::control::internal
