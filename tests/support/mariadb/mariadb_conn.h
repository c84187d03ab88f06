// The connection string of the MariaDB that a test runs against: $WEIR_TEST_MARIADB_CONN, or the
// first line of the file named by $WEIR_TEST_MARIADB_CONN_FILE (the `mariadb` CTest fixture
// writes it; see MariadbFixture.cmake): "host=127.0.0.1 port=N user=weir database=weir". Without
// either, the test fails, saying how to give one.

#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace weir::testing {

inline std::string mariadb_test_conn() {
  if (const char* conn = std::getenv("WEIR_TEST_MARIADB_CONN"); conn != nullptr && *conn != '\0') {
    return conn;
  }
  if (const char* file = std::getenv("WEIR_TEST_MARIADB_CONN_FILE"); file != nullptr) {
    std::ifstream in(file);
    std::string conn;
    if (std::getline(in, conn) && !conn.empty()) return conn;
    ADD_FAILURE() << "no MariaDB connection string in " << file
                  << ": did the mariadb fixture start?";
    return "";
  }
  ADD_FAILURE() << "this test needs MariaDB: run it through ctest (the `mariadb` fixture starts "
                   "one) or set WEIR_TEST_MARIADB_CONN_FILE";
  return "";
}

}  // namespace weir::testing
