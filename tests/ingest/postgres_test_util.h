// What the PostgreSQL ingestion tests share: a fresh database on the fixture's server, SQL over
// libpq, and a shard printed as COPY prints a table.

#pragma once

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/postgres/postgres_url.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "typed_shard_util.h"
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "weir/ingest/postgres.h"
#include "weir/persist/client.h"
#include "weir/sources/postgres/value.h"

namespace weir::ingest::testing {

// The fixture server's URL (see postgres_url.h).
inline std::string server_url() { return weir::testing::postgres_test_url(); }

// A libpq connection for the test's own SQL. Every statement must succeed.
class Sql {
 public:
  explicit Sql(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    EXPECT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
    exec(
        "SET DateStyle = ISO, MDY; SET IntervalStyle = postgres; SET TimeZone = UTC; "
        "SET extra_float_digits = 1; SET bytea_output = hex");
  }
  ~Sql() { PQfinish(conn_); }
  Sql(const Sql&) = delete;
  Sql& operator=(const Sql&) = delete;

  // Runs `sql`; returns the first column of every row.
  std::vector<std::string> exec(const std::string& sql) {
    std::vector<std::string> column;
    PGresult* result = PQexec(conn_, sql.c_str());
    const auto status = PQresultStatus(result);
    EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        << sql.substr(0, 300) << ": " << PQresultErrorMessage(result);
    if (status == PGRES_TUPLES_OK) {
      for (int i = 0; i < PQntuples(result); ++i) column.emplace_back(PQgetvalue(result, i, 0));
    }
    PQclear(result);
    return column;
  }
  // Runs `sql` and returns whether it succeeded (its error in `error`).
  bool try_exec(const std::string& sql, std::string* error = nullptr) {
    PGresult* result = PQexec(conn_, sql.c_str());
    const auto status = PQresultStatus(result);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok && error) *error = PQresultErrorMessage(result);
    PQclear(result);
    return ok;
  }
  std::string one(const std::string& sql) {
    auto rows = exec(sql);
    return rows.empty() ? "" : rows.front();
  }
  // COPY `table` TO STDOUT: its lines, sorted.
  std::vector<std::string> copy_lines(const std::string& table) {
    std::vector<std::string> lines;
    PGresult* result = PQexec(conn_, ("COPY " + table + " TO STDOUT").c_str());
    EXPECT_EQ(PQresultStatus(result), PGRES_COPY_OUT) << PQresultErrorMessage(result);
    PQclear(result);
    char* buffer = nullptr;
    int n;
    while ((n = PQgetCopyData(conn_, &buffer, 0)) > 0) {
      std::string line(buffer, static_cast<size_t>(n));
      if (!line.empty() && line.back() == '\n') line.pop_back();
      lines.push_back(std::move(line));
      PQfreemem(buffer);
    }
    while (PGresult* r = PQgetResult(conn_)) PQclear(r);
    std::sort(lines.begin(), lines.end());
    return lines;
  }

 private:
  PGconn* conn_;
};

// A database of its own on the fixture's server (dropped at the end, with its slots).
class TestDatabase {
 public:
  explicit TestDatabase(const std::string& name) : server_(server_url()) {
    if (server_.empty()) return;
    std::random_device random;
    name_ = absl::StrCat("weir_", name, "_", random() % 1000000);
    Sql(server_).exec("CREATE DATABASE " + name_);
    const size_t slash = server_.rfind('/');
    url_ = server_.substr(0, slash + 1) + name_;
  }
  ~TestDatabase() {
    if (server_.empty()) return;
    Sql admin(server_);
    // Slots are the cluster's, not the database's: drop them (their walsenders first).
    for (int attempt = 0; attempt < 50; ++attempt) {
      admin.exec(
          "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE "
          "database = '" +
          name_ + "' AND active_pid IS NOT NULL");
      admin.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" +
                 name_ + "' AND pid <> pg_backend_pid()");
      (void)admin.try_exec(
          "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
          "WHERE database = '" +
          name_ + "' AND NOT active");
      if (admin.one("SELECT count(*) FROM pg_replication_slots WHERE database = '" + name_ + "'") ==
          "0") {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    (void)admin.try_exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  }
  bool available() const { return !server_.empty(); }
  const std::string& url() const { return url_; }
  // A slot name of this database's own (slot names are the whole server's).
  std::string slot() const { return name_ + "_slot"; }

 private:
  std::string server_, name_, url_;
};

}  // namespace weir::ingest::testing
