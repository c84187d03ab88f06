#include "mysql/catalog.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

#include "weir/status.h"

namespace weir::sources::mysql {

namespace {

using Row = std::vector<std::optional<std::string>>;

std::string table_label(std::string_view database, std::string_view table) {
  return absl::StrCat(std::string(database), ".", std::string(table));
}

std::string_view text(const Row& row, size_t i) {
  return i < row.size() && row[i].has_value() ? std::string_view(*row[i]) : std::string_view();
}

bool starts_with_ignore_case(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(s[i])) !=
        absl::ascii_tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

bool is_null(const Row& row, size_t i) { return i >= row.size() || !row[i].has_value(); }

// A number column of information_schema; NULL is 0. Numbers past uint32 (no length weir uses
// is) saturate.
uint32_t number(const Row& row, size_t i) {
  const std::string_view s = text(row, i);
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec == std::errc::result_out_of_range || v > UINT32_MAX) return UINT32_MAX;
  return r.ec == std::errc() ? static_cast<uint32_t>(v) : 0;
}

// The width in "bit(64)".
std::optional<uint32_t> parenthesized_number(std::string_view column_type) {
  const size_t open = column_type.find('(');
  const size_t close = column_type.find(')', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return std::nullopt;
  uint32_t v = 0;
  const char* begin = column_type.data() + open + 1;
  const char* end = column_type.data() + close;
  const auto r = std::from_chars(begin, end, v);
  if (r.ec != std::errc() || r.ptr != end) return std::nullopt;
  return v;
}

absl::Status table_error(absl::Status status, std::string_view database, std::string_view table) {
  return absl::Status(status.code(),
                      absl::StrCat("loading the columns of ", table_label(database, table), ": ",
                                   status.message()));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> parse_elements(std::string_view column_type) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("COLUMN_TYPE ", std::string(column_type), ": ", std::string(why)));
  };
  size_t i;
  if (starts_with_ignore_case(column_type, "enum(")) {
    i = 5;
  } else if (starts_with_ignore_case(column_type, "set(")) {
    i = 4;
  } else {
    return bad("not enum(...) or set(...)");
  }
  std::vector<std::string> elements;
  const size_t n = column_type.size();
  while (true) {
    if (i >= n || column_type[i] != '\'') return bad("expected a quoted element");
    ++i;
    std::string element;
    while (true) {
      if (i >= n) return bad("unterminated element");
      const char ch = column_type[i++];
      if (ch == '\'') {
        if (i < n && column_type[i] == '\'') {
          element += '\'';
          ++i;
          continue;
        }
        break;
      }
      if (ch != '\\') {
        element += ch;
        continue;
      }
      if (i >= n) return bad("unterminated element");
      const char e = column_type[i++];
      switch (e) {
        case '0':
          element += '\0';
          break;
        case 'n':
          element += '\n';
          break;
        case 'r':
          element += '\r';
          break;
        case 't':
          element += '\t';
          break;
        case 'b':
          element += '\b';
          break;
        case 'Z':
          element += '\x1a';
          break;
        case '%':
        case '_':
          element += '\\';
          element += e;
          break;
        default:
          element += e;
          break;
      }
    }
    elements.push_back(std::move(element));
    if (i < n && column_type[i] == ',') {
      ++i;
      continue;
    }
    if (i < n && column_type[i] == ')') {
      ++i;
      break;
    }
    return bad("expected ',' or ')' after an element");
  }
  // Anything after the list (MySQL prints nothing there) is refused rather than misread.
  if (i != n) return bad("text after the element list");
  return elements;
}

absl::StatusOr<std::vector<MysqlColumn>> load_columns(MysqlConnection& conn,
                                                      std::string_view database,
                                                      std::string_view table) {
  const std::string db_literal = quote_literal(database);
  const std::string table_literal = quote_literal(table);
  // information_schema compares names by its collation (case-insensitively on some servers):
  // the rows are filtered here again by exact name.
  auto tables_or = conn.rows(
      absl::StrCat("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES "
                   "WHERE TABLE_SCHEMA = ",
                   db_literal, " AND TABLE_NAME = ", table_literal));
  if (!tables_or.ok()) return table_error(tables_or.status(), database, table);
  std::optional<std::string> table_type;
  for (const Row& row : *tables_or) {
    if (text(row, 0) == database && text(row, 1) == table) table_type = std::string(text(row, 2));
  }
  if (!table_type.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("no table ", table_label(database, table), " (", conn.what(), ")"));
  }
  if (*table_type != "BASE TABLE") {
    return absl::FailedPreconditionError(
        absl::StrCat(table_label(database, table), " is a ", absl::AsciiStrToLower(*table_type),
                     ", not a base table: weir reads only base tables"));
  }

  auto columns_or = conn.rows(absl::StrCat(
      "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, "
      "CHARACTER_SET_NAME, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, "
      "DATETIME_PRECISION, COLUMN_KEY FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ",
      db_literal, " AND TABLE_NAME = ", table_literal, " ORDER BY ORDINAL_POSITION"));
  if (!columns_or.ok()) return table_error(columns_or.status(), database, table);
  auto checks_or =
      conn.rows(absl::StrCat("SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE FROM "
                             "information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ",
                             db_literal, " AND TABLE_NAME = ", table_literal));
  if (!checks_or.ok()) return table_error(checks_or.status(), database, table);

  std::vector<MysqlColumn> columns;
  for (const Row& row : *columns_or) {
    if (text(row, 0) != database || text(row, 1) != table) continue;
    MysqlColumn c;
    c.name = std::string(text(row, 2));
    c.data_type = absl::AsciiStrToLower(std::string(text(row, 3)));
    c.column_type = std::string(text(row, 4));
    c.is_unsigned = absl::AsciiStrToLower(c.column_type).find(" unsigned") != std::string::npos;
    c.nullable = text(row, 5) == "YES";
    c.charset = std::string(text(row, 6));
    const std::string_view t = c.data_type;
    if (t == "char" || t == "varchar" || t == "binary" || t == "varbinary") {
      c.length = number(row, 7);
    } else if (t == "bit") {
      const std::optional<uint32_t> width = parenthesized_number(c.column_type);
      c.length = width.has_value() ? *width : number(row, 8);
    }
    if (t == "decimal") {
      c.precision = number(row, 8);
      c.scale = number(row, 9);
    } else if (!is_null(row, 10)) {
      c.scale = number(row, 10);
    }
    if (t == "enum" || t == "set") {
      auto elements = parse_elements(c.column_type);
      if (!elements.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(table_label(database, table), " column ",
                                                       quote_identifier(c.name), ": ",
                                                       elements.status().message()));
      }
      c.elements = *std::move(elements);
    }
    c.primary_key = text(row, 11) == "PRI";
    if (t == "longtext") {
      const std::string clause = absl::StrCat("json_valid(", quote_identifier(c.name), ")");
      for (const Row& check : *checks_or) {
        if (text(check, 0) == database && text(check, 1) == table &&
            absl::AsciiStrToLower(std::string(text(check, 2))) == absl::AsciiStrToLower(clause)) {
          c.is_json = true;
        }
      }
    }
    columns.push_back(std::move(c));
  }
  if (columns.empty()) {
    // Dropped between the two queries.
    return absl::NotFoundError(
        absl::StrCat("no table ", table_label(database, table), " (", conn.what(), ")"));
  }
  return columns;
}

absl::StatusOr<std::vector<std::string>> list_base_tables(MysqlConnection& conn,
                                                          std::string_view database) {
  auto rows = conn.rows(absl::StrCat(
      "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ",
      quote_literal(database), " AND TABLE_TYPE = 'BASE TABLE'"));
  if (!rows.ok()) {
    return absl::Status(rows.status().code(),
                        absl::StrCat("listing the tables of ", std::string(database), ": ",
                                     rows.status().message()));
  }
  std::vector<std::string> tables;
  for (const Row& row : *rows) {
    if (text(row, 0) == database) tables.emplace_back(text(row, 1));
  }
  std::sort(tables.begin(), tables.end());
  return tables;
}

}  // namespace weir::sources::mysql
