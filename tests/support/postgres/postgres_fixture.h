// Runs the throwaway PostgreSQL script (postgres_fixture.sh, named by WEIR_POSTGRES_FIXTURE) from a
// test that manages its own server: start, stop, restart or new-timeline.

#pragma once

#include <string>

#include "../fixture_script.h"

namespace weir::testing {

// Runs `postgres_fixture.sh <args>`. Empty on success; otherwise what the script printed and how
// it ended, for the test's failure message.
inline std::string postgres_fixture(const std::string& args) {
  return run_fixture_script(WEIR_POSTGRES_FIXTURE, args);
}

}  // namespace weir::testing
