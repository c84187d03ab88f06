// The flags that define a source (weir/ingest/source_spec.h), as `weir ingest` and
// `weir ctl create source` take them: registered once here, so both commands take the same flags
// with the same help, defaults and checks.

#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace weir::tools {

// Adds --source, --scale, --until, ... (every flag of an ingest::SourceSpec) to `cmd`. Each value
// is checked as it is parsed, by the rules of source definitions (ingest::check_source_flag), so
// that a mistyped one is an error naming its flag before any work; --help shows each with its
// default, if it has one.
void add_source_flags(CLI::App& cmd);

// The source flags `cmd` was given, as (name without dashes, value as typed) pairs, for
// ingest::parse_source_spec (which puts the values in canonical form).
std::vector<std::pair<std::string, std::string>> source_flags(const CLI::App& cmd);

}  // namespace weir::tools
