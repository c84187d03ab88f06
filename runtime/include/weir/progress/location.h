// Locations in a dataflow graph: operator outputs are sources, operator inputs are targets.
//
// Within a scope, node 0 is the scope itself: its outputs (sources) are the scope's inputs as
// seen from inside, and its inputs (targets) are the scope's outputs. A pointstamp is a
// (Location, time) pair with a count.
//
// Thread safety: value types.

#pragma once

#include <compare>
#include <cstdint>
#include <ostream>

namespace weir {

// An operator output port.
struct Source {
  uint32_t node = 0;
  uint32_t port = 0;
  friend constexpr auto operator<=>(const Source&, const Source&) = default;
};

// An operator input port.
struct Target {
  uint32_t node = 0;
  uint32_t port = 0;
  friend constexpr auto operator<=>(const Target&, const Target&) = default;
};

// A source or a target. Ordered by (node, port, kind).
struct Location {
  uint32_t node = 0;
  uint32_t port = 0;
  bool is_source = false;

  constexpr Location() = default;
  constexpr Location(uint32_t n, uint32_t p, bool source) : node(n), port(p), is_source(source) {}
  constexpr Location(Source s) : node(s.node), port(s.port), is_source(true) {}   // NOLINT
  constexpr Location(Target t) : node(t.node), port(t.port), is_source(false) {}  // NOLINT

  constexpr Source source() const { return {node, port}; }
  constexpr Target target() const { return {node, port}; }

  friend constexpr auto operator<=>(const Location&, const Location&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Location& l) {
    return os << (l.is_source ? "source(" : "target(") << l.node << "," << l.port << ")";
  }
};

}  // namespace weir
