// Runs the throwaway MariaDB script (mariadb_fixture.sh, named by WEIR_MARIADB_FIXTURE) from a test
// that manages its own server: start, stop, restart, sql.

#pragma once

#include <string>

#include "../fixture_script.h"

namespace weir::testing {

// Runs `mariadb_fixture.sh <args>`. Empty on success; otherwise what the script printed and how
// it ended, for the test's failure message.
inline std::string mariadb_fixture(const std::string& args) {
  return run_fixture_script(WEIR_MARIADB_FIXTURE, args);
}

}  // namespace weir::testing
