#include "mysql/ddl.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace weir::sources::mysql {

namespace {

// The server version executable comments are read for (/*!NNNNNN ... */): MariaDB 10.11.
constexpr uint64_t kServerVersion = 101199;

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
         static_cast<unsigned char>(c) >= 0x80;
}

struct Token {
  std::string text;
  bool quoted = false;  // `name` or "name": never a keyword.
};

// The statement's tokens: words (keywords and bare names, case kept), quoted names (unquoted),
// and single punctuation characters; 'strings' and comments skipped, except the text of
// executable comments (/*! ... */ and /*M! ... */, after their optional version number).
std::vector<Token> tokens_of(std::string_view q) {
  std::vector<Token> tokens;
  size_t i = 0;
  bool executable = false;  // Inside /*! ... */: its "*/" closes it.
  while (i < q.size()) {
    const char c = q[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (executable && q.substr(i, 2) == "*/") {
      executable = false;
      i += 2;
    } else if (q.substr(i, 3) == "/*!" || q.substr(i, 4) == "/*M!") {
      // Executed by a server at least the version it names (MariaDB 10.11 here: 101199 and
      // below); a later version's comment is skipped, as the server skips it.
      i += q[i + 2] == '!' ? 3 : 4;
      uint64_t version = 0;
      size_t digits = 0;
      while (i < q.size() && std::isdigit(static_cast<unsigned char>(q[i]))) {
        version = version * 10 + static_cast<uint64_t>(q[i] - '0');
        ++i;
        ++digits;
      }
      if (digits > 0 && version > kServerVersion) {
        const size_t end = q.find("*/", i);
        i = end == std::string_view::npos ? q.size() : end + 2;
      } else {
        executable = true;
      }
    } else if (q.substr(i, 2) == "/*") {
      const size_t end = q.find("*/", i + 2);
      i = end == std::string_view::npos ? q.size() : end + 2;
    } else if ((q.substr(i, 2) == "--" &&
                (i + 2 == q.size() || std::isspace(static_cast<unsigned char>(q[i + 2])))) ||
               c == '#') {
      const size_t end = q.find('\n', i);
      i = end == std::string_view::npos ? q.size() : end + 1;
    } else if (c == '`' || c == '"') {
      Token token{"", true};
      for (++i; i < q.size(); ++i) {
        if (q[i] == c) {
          if (i + 1 < q.size() && q[i + 1] == c) {
            token.text.push_back(c);
            ++i;
            continue;
          }
          ++i;
          break;
        }
        token.text.push_back(q[i]);
      }
      tokens.push_back(std::move(token));
    } else if (c == '\'') {
      for (++i; i < q.size(); ++i) {
        if (q[i] == '\\') {
          ++i;
        } else if (q[i] == '\'') {
          if (i + 1 < q.size() && q[i + 1] == '\'') {
            ++i;
            continue;
          }
          break;
        }
      }
      ++i;
    } else if (word_char(c)) {
      const size_t start = i;
      while (i < q.size() && word_char(q[i])) ++i;
      tokens.push_back({std::string(q.substr(start, i - start)), false});
    } else {
      tokens.push_back({std::string(1, c), false});
      ++i;
    }
  }
  return tokens;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view database)
      : tokens_(std::move(tokens)), database_(database) {}

  // Whether token `at` is the keyword `keyword` (lower case).
  bool is(size_t at, std::string_view keyword) const {
    if (at >= tokens_.size() || tokens_[at].quoted) return false;
    const std::string& t = tokens_[at].text;
    return t.size() == keyword.size() &&
           std::equal(t.begin(), t.end(), keyword.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           });
  }
  bool punct(size_t at, char c) const {
    return at < tokens_.size() && !tokens_[at].quoted && tokens_[at].text.size() == 1 &&
           tokens_[at].text[0] == c;
  }
  size_t size() const { return tokens_.size(); }

  // A table name at `i`: [db .] table; advances `i` past it.
  std::optional<std::pair<std::string, std::string>> name(size_t& i) const {
    if (i >= tokens_.size() || (!tokens_[i].quoted && !word_char(tokens_[i].text[0]))) {
      return std::nullopt;
    }
    std::string first = tokens_[i].text;
    ++i;
    if (punct(i, '.') && i + 1 < tokens_.size()) {
      std::string second = tokens_[i + 1].text;
      i += 2;
      return std::make_pair(std::move(first), std::move(second));
    }
    return std::make_pair(std::string(database_), std::move(first));
  }

  // A comma-separated list of names from `i` (pairs: "a TO b" items).
  void names(size_t& i, bool pairs, DdlTargets& targets) const {
    for (;;) {
      if (is(i, "if") && is(i + 1, "exists")) i += 2;
      auto a = name(i);
      if (!a) return;
      targets.tables.push_back(*a);
      if (is(i, "nowait")) ++i;
      if (is(i, "wait")) i += 2;
      if (pairs && is(i, "to")) {
        ++i;
        auto b = name(i);
        if (!b) return;
        targets.tables.push_back(*b);
      }
      if (!punct(i, ',')) return;
      ++i;
    }
  }

  // Whether the ALTER TABLE clause at [begin, end) keeps the table's rows and columns.
  bool harmless_clause(size_t b, size_t e) const {
    if (b >= e) return true;
    const auto has = [&](std::string_view keyword) {
      for (size_t k = b; k < e; ++k) {
        if (is(k, keyword)) return true;
      }
      return false;
    };
    if (is(b, "remove") && is(b + 1, "partitioning") && b + 2 == e) return true;
    if (has("partition") || has("partitions")) {
      // Data moves or goes: DROP, TRUNCATE, EXCHANGE, REORGANIZE, COALESCE (and DISCARD or
      // IMPORT of a partition's tablespace). ADD, REBUILD, OPTIMIZE, ANALYZE, CHECK, REPAIR,
      // REMOVE PARTITIONING and PARTITION BY keep every row.
      return !(has("drop") || has("truncate") || has("exchange") || has("reorganize") ||
               has("coalesce") || has("discard") || has("import") || has("convert"));
    }
    if (is(b, "add")) {
      size_t k = b + 1;
      if (is(k, "constraint")) {
        ++k;
        if (!is(k, "foreign") && !is(k, "check") && !is(k, "unique") && !is(k, "primary")) ++k;
      }
      // A foreign key may cascade: MariaDB applies cascades without logging them.
      return is(k, "index") || is(k, "key") || is(k, "unique") || is(k, "fulltext") ||
             is(k, "spatial") || is(k, "primary") || is(k, "check") || is(k, "vector");
    }
    if (is(b, "drop")) {
      return is(b + 1, "index") || is(b + 1, "key") || is(b + 1, "primary") ||
             is(b + 1, "foreign") || is(b + 1, "constraint") || is(b + 1, "check");
    }
    if (is(b, "rename")) return is(b + 1, "index") || is(b + 1, "key");
    if (is(b, "alter")) {
      // ALTER [COLUMN] c SET DEFAULT | DROP DEFAULT | SET [IN]VISIBLE; ALTER INDEX i [NOT] IGNORED.
      if (is(b + 1, "index") || is(b + 1, "key")) return true;
      return has("default") || has("visible") || has("invisible");
    }
    if (is(b, "convert")) return false;  // CONVERT TO CHARACTER SET rewrites every string.
    if (is(b, "engine")) {
      // Another engine may keep nothing (BLACKHOLE) or hold rows elsewhere.
      const size_t v = punct(b + 1, '=') ? b + 2 : b + 1;
      return is(v, "innodb") && v + 1 == e;
    }
    if (is(b, "default") || is(b, "character") || is(b, "charset") || is(b, "collate")) {
      return true;  // The table's default, for columns added later.
    }
    static constexpr std::string_view kOptions[] = {"comment",
                                                    "engine",
                                                    "auto_increment",
                                                    "algorithm",
                                                    "lock",
                                                    "force",
                                                    "order",
                                                    "row_format",
                                                    "key_block_size",
                                                    "stats_persistent",
                                                    "stats_auto_recalc",
                                                    "stats_sample_pages",
                                                    "checksum",
                                                    "pack_keys",
                                                    "delay_key_write",
                                                    "min_rows",
                                                    "max_rows",
                                                    "avg_row_length",
                                                    "page_checksum",
                                                    "transactional",
                                                    "encrypted",
                                                    "encryption_key_id",
                                                    "page_compressed",
                                                    "page_compression_level",
                                                    "disable",
                                                    "enable",
                                                    "union",
                                                    "insert_method",
                                                    "data",
                                                    "index",
                                                    "connection",
                                                    "sequence",
                                                    "ietf_quotes",
                                                    "table_checksum"};
    return std::any_of(std::begin(kOptions), std::end(kOptions),
                       [&](std::string_view option) { return is(b, option); });
  }

 private:
  std::vector<Token> tokens_;
  std::string_view database_;
};

// Statements that change no table's rows or columns (or are transaction control), by their
// first words.
bool harmless_statement(const Parser& p) {
  if (p.size() == 0) return true;
  if (p.is(0, "begin") || p.is(0, "commit") || p.is(0, "savepoint") || p.is(0, "release") ||
      p.is(0, "xa") || p.is(0, "grant") || p.is(0, "revoke") || p.is(0, "analyze") ||
      p.is(0, "optimize") || p.is(0, "check") || p.is(0, "checksum") || p.is(0, "flush") ||
      p.is(0, "set") || p.is(0, "do") || p.is(0, "use") || p.is(0, "repair")) {
    return true;
  }
  if (p.is(0, "create") || p.is(0, "drop") || p.is(0, "alter")) {
    size_t k = 1;
    if (p.is(k, "or") && p.is(k + 1, "replace")) k += 2;
    while (p.is(k, "definer") || p.is(k, "unique") || p.is(k, "fulltext") || p.is(k, "spatial") ||
           p.is(k, "online") || p.is(k, "offline") || p.is(k, "algorithm") || p.is(k, "sql") ||
           p.is(k, "aggregate")) {
      ++k;
    }
    static constexpr std::string_view kObjects[] = {
        "index", "trigger", "view",     "procedure", "function", "event",    "user",
        "role",  "server",  "sequence", "package",   "synonym",  "database", "schema"};
    // CREATE TABLE (a new table; CREATE OR REPLACE is parsed as kReplace) names its sources.
    if (p.is(0, "create") && (p.is(k, "table") || p.is(k, "temporary"))) return true;
    for (size_t j = k; j < std::min<size_t>(k + 12, p.size()); ++j) {
      for (std::string_view object : kObjects) {
        if (p.is(j, object)) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::string statement_head(std::string_view query, size_t words) {
  std::string head;
  size_t taken = 0;
  for (const Token& token : tokens_of(query)) {
    if (taken == words) break;
    if (!head.empty()) head.push_back(' ');
    head += lower(token.text);
    ++taken;
  }
  return head;
}

// Case-insensitive: MariaDB's table names are case-sensitive on Linux, so this may also match
// another table, which fails closed.
bool mentions(std::string_view query, std::string_view table) {
  const auto low = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  if (table.empty() || query.size() < table.size()) return false;
  for (size_t i = 0; i + table.size() <= query.size(); ++i) {
    bool equal = true;
    for (size_t j = 0; j < table.size() && equal; ++j) {
      equal = low(query[i + j]) == low(table[j]);
    }
    if (!equal) continue;
    const bool before = i == 0 || !word_char(query[i - 1]);
    const bool after = i + table.size() == query.size() || !word_char(query[i + table.size()]);
    if (before && after) return true;
  }
  return false;
}

namespace {

DdlTargets classify(std::vector<Token> tokens, std::string_view database);

}  // namespace

DdlTargets ddl_targets(std::string_view query, std::string_view database) {
  return classify(tokens_of(query), database);
}

namespace {

DdlTargets classify(std::vector<Token> tokens, std::string_view database) {
  {
    // SET STATEMENT var = value, ... FOR statement: the statement after FOR.
    const Parser p(tokens, database);
    if (p.is(0, "set") && p.is(1, "statement")) {
      int depth = 0;
      for (size_t k = 2; k < p.size(); ++k) {
        if (p.punct(k, '(')) ++depth;
        if (p.punct(k, ')')) --depth;
        if (depth == 0 && p.is(k, "for")) {
          return classify(
              std::vector<Token>(tokens.begin() + static_cast<ptrdiff_t>(k) + 1, tokens.end()),
              database);
        }
      }
    }
  }
  const Parser p(std::move(tokens), database);
  DdlTargets targets;
  using Kind = DdlTargets::Kind;
  size_t i = 0;
  if (p.is(0, "truncate")) {
    i = p.is(1, "table") ? 2 : 1;
    targets.kind = Kind::kTruncate;
    p.names(i, false, targets);
  } else if (p.is(0, "drop") && (p.is(1, "database") || p.is(1, "schema"))) {
    i = 2;
    if (p.is(i, "if") && p.is(i + 1, "exists")) i += 2;
    targets.kind = Kind::kDropDatabase;
    if (i < p.size()) {
      size_t j = i;
      if (auto named = p.name(j)) targets.database = named->second;
    }
  } else if (p.is(0, "drop") && (p.is(1, "table") || p.is(1, "tables") ||
                                 (p.is(1, "temporary") && p.is(2, "table")))) {
    if (p.is(1, "temporary")) {
      targets.harmless = true;  // A temporary table is not a base table.
      return targets;
    }
    i = 2;
    if (p.is(i, "if") && p.is(i + 1, "exists")) i += 2;
    targets.kind = Kind::kDrop;
    p.names(i, false, targets);
  } else if (p.is(0, "rename") && (p.is(1, "table") || p.is(1, "tables"))) {
    i = 2;
    targets.kind = Kind::kRename;
    p.names(i, true, targets);
  } else if (p.is(0, "create") && p.is(1, "or") && p.is(2, "replace") &&
             (p.is(3, "table") || p.is(3, "temporary"))) {
    if (p.is(3, "temporary")) {
      targets.harmless = true;
      return targets;
    }
    i = 4;
    if (p.is(i, "if") && p.is(i + 1, "not") && p.is(i + 2, "exists")) i += 3;
    targets.kind = Kind::kReplace;
    p.names(i, false, targets);
  } else if (p.is(0, "alter")) {
    i = 1;
    bool ignore = false;  // ALTER IGNORE: a new unique key drops the rows that repeat one.
    while (p.is(i, "online") || p.is(i, "ignore")) {
      ignore |= p.is(i, "ignore");
      ++i;
    }
    if (!p.is(i, "table")) {
      targets.harmless = harmless_statement(p);
      return targets;
    }
    ++i;
    if (p.is(i, "if") && p.is(i + 1, "exists")) i += 2;
    targets.kind = Kind::kAlter;
    p.names(i, false, targets);
    // The clauses, split at commas outside parentheses; EXCHANGE PARTITION ... WITH TABLE u
    // changes u too.
    targets.harmless = !ignore;
    size_t begin = i;
    int depth = 0;
    for (size_t k = i; k <= p.size(); ++k) {
      if (k < p.size() && p.punct(k, '(')) ++depth;
      if (k < p.size() && p.punct(k, ')')) --depth;
      // Partitioning options follow the other clauses without a comma: they start a clause.
      const bool partitioning =
          k < p.size() && depth == 0 && k > begin &&
          ((p.is(k, "partition") && p.is(k + 1, "by")) ||
           (p.is(k, "remove") && p.is(k + 1, "partitioning")) || p.is(k, "partitions"));
      if (partitioning) {
        if (!p.harmless_clause(begin, k)) targets.harmless = false;
        begin = k;
        continue;
      }
      if (k < p.size() && !(depth == 0 && p.punct(k, ','))) continue;
      if (p.is(begin, "rename") && !p.is(begin + 1, "column") && !p.is(begin + 1, "index") &&
          !p.is(begin + 1, "key")) {
        targets.renames = true;
      }
      if (!p.harmless_clause(begin, k)) targets.harmless = false;
      begin = k + 1;
    }
    // The other table of EXCHANGE PARTITION ... WITH TABLE u, CONVERT PARTITION p TO TABLE u and
    // CONVERT TABLE u TO PARTITION p changes too.
    for (size_t k = i; k + 2 < p.size(); ++k) {
      if ((p.is(k, "with") || p.is(k, "to") || p.is(k, "convert")) && p.is(k + 1, "table")) {
        size_t j = k + 2;
        if (auto other = p.name(j)) targets.tables.push_back(*other);
      }
    }
  } else {
    targets.harmless = harmless_statement(p);
  }
  return targets;
}

}  // namespace

}  // namespace weir::sources::mysql
