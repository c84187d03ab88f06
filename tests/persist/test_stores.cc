#include "test_stores.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include <libpq-fe.h>

namespace weir::persist::testing {
namespace {

std::string random_suffix() {
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex mu;
  std::lock_guard lock(mu);
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(rng()));
  return text;
}

struct TempDirs {
  std::mutex mu;
  std::vector<std::filesystem::path> paths;
  ~TempDirs() {
    for (const auto& path : paths) {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  }
};

TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string temp_dir() {
  std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / ("weir-persist-" + random_suffix());
  std::filesystem::create_directories(path);
  std::lock_guard lock(temp_dirs().mu);
  temp_dirs().paths.push_back(path);
  return path.string();
}

std::string postgres_url() {
  if (const char* url = std::getenv("WEIR_TEST_POSTGRES_URL"); url != nullptr && *url != '\0') {
    return url;
  }
  if (const char* file = std::getenv("WEIR_TEST_POSTGRES_URL_FILE"); file != nullptr) {
    std::ifstream in(file);
    std::string url;
    if (std::getline(in, url) && !url.empty()) {
      return url;
    }
    ADD_FAILURE() << "no PostgreSQL URL in " << file << ": did the postgres fixture start?";
    return "";
  }
  ADD_FAILURE() << "this test needs PostgreSQL: run it through ctest (the `postgres` fixture "
                   "starts one) or set WEIR_TEST_POSTGRES_URL";
  return "";
}

std::string fresh_postgres_consensus_url() {
  const std::string url = postgres_url();
  if (url.empty()) {
    return "";
  }
  const std::string schema = "weir_test_" + random_suffix();
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    ADD_FAILURE() << "cannot connect to " << url << ": " << PQerrorMessage(conn);
    PQfinish(conn);
    return "";
  }
  PGresult* result = PQexec(conn, ("CREATE SCHEMA " + schema).c_str());
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  if (!ok) {
    ADD_FAILURE() << "CREATE SCHEMA: " << PQresultErrorMessage(result);
  }
  PQclear(result);
  PQfinish(conn);
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" +
         schema;
}

PersistLocation fresh_location(const std::string& kind) {
  if (kind == "mem") {
    const std::string name = random_suffix();
    return {"mem://" + name, "mem://" + name};
  }
  const std::string dir = temp_dir();
  if (kind == "sqlite") {
    return PersistLocation::in_directory(dir);
  }
  if (kind == "postgres") {
    return {"file://" + dir + "/blob", fresh_postgres_consensus_url()};
  }
  ADD_FAILURE() << "unknown store kind " << kind;
  return {};
}

}  // namespace weir::persist::testing
