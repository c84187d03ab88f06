#include "mysql/ddl.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace weir::sources::mysql {

// The lower-case, whitespace-collapsed start of a statement, comments skipped: to tell DDL apart.
std::string statement_head(std::string_view query, size_t words) {
  std::string head;
  size_t i = 0, taken = 0;
  while (i < query.size() && taken < words) {
    const char c = query[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (query.substr(i, 2) == "/*") {
      const size_t end = query.find("*/", i + 2);
      i = end == std::string_view::npos ? query.size() : end + 2;
      continue;
    }
    if (query.substr(i, 2) == "--" || c == '#') {
      const size_t end = query.find('\n', i);
      i = end == std::string_view::npos ? query.size() : end + 1;
      continue;
    }
    if (!head.empty()) head.push_back(' ');
    while (i < query.size() && !std::isspace(static_cast<unsigned char>(query[i]))) {
      head.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(query[i++]))));
    }
    ++taken;
  }
  return head;
}

// Whether `query` names table `table` (as a word, quoted or not; case-insensitively: MariaDB's
// table names are case-sensitive on Linux, so this may also match another table, which only
// costs a catalog check).
bool mentions(std::string_view query, std::string_view table) {
  const auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  const auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
           static_cast<unsigned char>(c) >= 0x80;
  };
  if (table.empty() || query.size() < table.size()) return false;
  for (size_t i = 0; i + table.size() <= query.size(); ++i) {
    bool equal = true;
    for (size_t j = 0; j < table.size() && equal; ++j)
      equal = lower(query[i + j]) == lower(table[j]);
    if (!equal) continue;
    const bool before = i == 0 || !word(query[i - 1]);
    const bool after = i + table.size() == query.size() || !word(query[i + table.size()]);
    if (before && after) return true;
  }
  return false;
}

// The statement's tokens: identifiers (bare or `quoted`, unquoted), punctuation, keywords; string
// literals and comments skipped. Bare words keep their case; compare keywords with `is`.
namespace {

std::vector<std::pair<std::string, bool>> ddl_tokens(std::string_view q) {
  std::vector<std::pair<std::string, bool>> tokens;  // (text, quoted)
  size_t i = 0;
  const auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
           static_cast<unsigned char>(c) >= 0x80;
  };
  while (i < q.size()) {
    const char c = q[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (q.substr(i, 2) == "/*") {
      const size_t end = q.find("*/", i + 2);
      i = end == std::string_view::npos ? q.size() : end + 2;
    } else if (q.substr(i, 2) == "--" || c == '#') {
      const size_t end = q.find('\n', i);
      i = end == std::string_view::npos ? q.size() : end + 1;
    } else if (c == '`') {
      std::string name;
      for (++i; i < q.size(); ++i) {
        if (q[i] == '`') {
          if (i + 1 < q.size() && q[i + 1] == '`') {
            name.push_back('`');
            ++i;
            continue;
          }
          ++i;
          break;
        }
        name.push_back(q[i]);
      }
      tokens.emplace_back(std::move(name), true);
    } else if (c == '\'' || c == '"') {
      for (++i; i < q.size() && q[i] != c; ++i) {
        if (q[i] == '\\') ++i;
      }
      ++i;
    } else if (word(c)) {
      const size_t start = i;
      while (i < q.size() && word(q[i])) ++i;
      tokens.emplace_back(std::string(q.substr(start, i - start)), false);
    } else {
      tokens.emplace_back(std::string(1, c), false);
      ++i;
    }
  }
  return tokens;
}

}  // namespace

DdlTargets ddl_targets(std::string_view query, std::string_view database) {
  const auto tokens = ddl_tokens(query);
  DdlTargets targets;
  size_t i = 0;
  const auto is = [&](size_t at, std::string_view keyword) {
    if (at >= tokens.size() || tokens[at].second) return false;
    const std::string& t = tokens[at].first;
    return t.size() == keyword.size() &&
           std::equal(t.begin(), t.end(), keyword.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           });
  };
  // A table name at i: [db .] table; advances i past it.
  const auto name = [&]() -> std::optional<std::pair<std::string, std::string>> {
    if (i >= tokens.size()) return std::nullopt;
    std::string first = tokens[i].first;
    ++i;
    if (i + 1 < tokens.size() && tokens[i].first == "." && !tokens[i].second) {
      std::string second = tokens[i + 1].first;
      i += 2;
      return std::make_pair(std::move(first), std::move(second));
    }
    return std::make_pair(std::string(database), std::move(first));
  };
  const auto names = [&](bool pairs) {
    for (;;) {
      auto a = name();
      if (!a) return;
      targets.tables.push_back(*a);
      if (pairs && is(i, "to")) {
        ++i;
        auto b = name();
        if (!b) return;
        targets.tables.push_back(*b);
      }
      if (i < tokens.size() && tokens[i].first == "," && !tokens[i].second) {
        ++i;
        continue;
      }
      return;
    }
  };
  if (is(0, "truncate")) {
    i = is(1, "table") ? 2 : 1;
    targets.kind = DdlTargets::Kind::kTruncate;
    names(false);
  } else if (is(0, "drop") && (is(1, "table") || (is(1, "temporary") && is(2, "table")))) {
    if (is(1, "temporary")) return targets;  // A temporary table is not a base table.
    i = 2;
    if (is(i, "if") && is(i + 1, "exists")) i += 2;
    targets.kind = DdlTargets::Kind::kDrop;
    names(false);
  } else if (is(0, "rename") && is(1, "table")) {
    i = 2;
    targets.kind = DdlTargets::Kind::kRename;
    names(true);
  } else if (is(0, "create") && is(1, "or") && is(2, "replace") &&
             (is(3, "table") || (is(3, "temporary")))) {
    if (is(3, "temporary")) return targets;
    i = 4;
    if (is(i, "if") && is(i + 1, "not") && is(i + 2, "exists")) i += 3;
    targets.kind = DdlTargets::Kind::kReplace;
    names(false);
  } else if (is(0, "alter")) {
    i = 1;
    while (is(i, "online") || is(i, "ignore")) ++i;
    if (!is(i, "table")) return targets;
    ++i;
    if (is(i, "if") && is(i + 1, "exists")) i += 2;
    targets.kind = DdlTargets::Kind::kAlter;
    names(false);
    for (size_t k = i; k + 1 < tokens.size(); ++k) {
      if (is(k, "rename") && !is(k + 1, "column") && !is(k + 1, "index") && !is(k + 1, "key")) {
        targets.renames = true;
      }
    }
  }
  return targets;
}

}  // namespace weir::sources::mysql
