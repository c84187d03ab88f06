// Fresh, empty persist stores for tests.

#pragma once

#include <string>

#include "weir/persist/config.h"

namespace weir::persist::testing {

// A fresh directory, removed when the test binary exits.
std::string temp_dir();

// The URL of the test PostgreSQL server (from WEIR_TEST_POSTGRES_URL, or the file named by
// WEIR_TEST_POSTGRES_URL_FILE, which the CTest fixture `postgres` writes). Fails the current test
// and returns "" if neither is set.
std::string postgres_url();

// A consensus URL in a fresh schema of the test PostgreSQL server.
std::string fresh_postgres_consensus_url();

// A fresh empty store:
//   "mem"       mem://<unique> blob and consensus
//   "sqlite"    a file blob and a SQLite consensus in a fresh directory
//   "postgres"  a file blob in a fresh directory and a PostgreSQL consensus in a fresh schema
PersistLocation fresh_location(const std::string& kind);

}  // namespace weir::persist::testing
