// The URL of the PostgreSQL that a test runs against: $WEIR_TEST_POSTGRES_URL, or the first line
// of the file named by $WEIR_TEST_POSTGRES_URL_FILE (the `postgres` CTest fixture writes it; see
// PostgresFixture.cmake). Without either, the test fails, saying how to give one.

#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace weir::testing {

inline std::string postgres_test_url() {
  if (const char* url = std::getenv("WEIR_TEST_POSTGRES_URL"); url != nullptr && *url != '\0') {
    return url;
  }
  if (const char* file = std::getenv("WEIR_TEST_POSTGRES_URL_FILE"); file != nullptr) {
    std::ifstream in(file);
    std::string url;
    if (std::getline(in, url) && !url.empty()) return url;
    ADD_FAILURE() << "no PostgreSQL URL in " << file << ": did the postgres fixture start?";
    return "";
  }
  ADD_FAILURE() << "this test needs PostgreSQL: run it through ctest (the `postgres` fixture "
                   "starts one) or set WEIR_TEST_POSTGRES_URL_FILE";
  return "";
}

}  // namespace weir::testing
