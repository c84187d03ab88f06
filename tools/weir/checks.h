// Checks of option values (CLI11 validators), so that a mistyped value is an error naming its
// option ("--scale: ...") before a command does any work, rather than a value read otherwise
// than it was meant: CLI11 alone reads "-1" as 2^64 - 1 for an unsigned option, "010" as 8 and
// lets "nan" through CLI::Range.
//
// A check's description is what `--help` shows after the type ("UINT:1..256"); the bash
// completion offers the names of a `one_of` check ("TEXT:{a,b}") and directories for an option
// of type DIR (completion_command.cc).
//
// Thread safety: immutable; a check may run on any thread.

#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include <CLI/CLI.hpp>

namespace weir::tools {

// Worker threads in one process. More than the machine has cores buys nothing, and each worker
// costs memory for every other one (256 take 160 MB and seconds to start; 100000 exhausted 24
// GB).
inline constexpr size_t kMaxWorkers = 256;

// A decimal number in [min, max]: digits only (no sign, spaces, exponent, hex or octal).
CLI::Validator unsigned_in(uint64_t min = 0, uint64_t max = UINT64_MAX);

// 1..kMaxWorkers.
CLI::Validator worker_count();

// A finite number in [min, max].
CLI::Validator number_in(double min, double max);

// Not the empty string.
CLI::Validator non_empty();

// One of `names`, exactly; the description lists them ("{a,b}").
CLI::Validator one_of(std::initializer_list<std::string> names);

// PREFIX<sep>REST with a non-empty PREFIX and REST a decimal number ("bids=100", "bids@5").
CLI::Validator name_and_number(char separator, const std::string& what);

// Where a persist location is or will be: a directory, or a path where there is nothing yet.
CLI::Validator persist_dir();

// An existing persist location: a directory holding consensus.db. The read-only commands, so
// that a mistyped path is an error rather than a new, empty location.
CLI::Validator existing_persist_dir();

// A blob store URL (file:///DIR, mem://[NAME]); with `existing`, a file:// one's directory
// must exist.
CLI::Validator blob_url(bool existing);

// A consensus URL (sqlite:///PATH, postgres://..., mem://[NAME]); with `existing`, a sqlite://
// one's file must exist.
CLI::Validator consensus_url(bool existing);

// An address to serve HTTP on: PORT (loopback), HOST:PORT or [IPV6]:PORT
// (observe::parse_http_address).
CLI::Validator http_address();

}  // namespace weir::tools
