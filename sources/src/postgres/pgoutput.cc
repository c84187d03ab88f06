#include "weir/sources/postgres/pgoutput.h"

#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

#include "weir/status.h"

namespace weir::sources::postgres {
namespace {

// Debian's abseil is built with its own string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0).
absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }

// ---------------------------------------------------------------------------------------------
// Big-endian integers

uint64_t load_be(const char* p, size_t n) {
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i) {
    value = (value << 8) | static_cast<unsigned char>(p[i]);
  }
  return value;
}

void append_be(std::string& out, uint64_t value, size_t n) {
  for (size_t i = n; i-- > 0;) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

// A printable rendering of a tag byte for error messages: 'I' or 0x00.
std::string tag_text(unsigned char tag) {
  if (tag >= 0x21 && tag < 0x7f) {
    return absl::StrCat("'", std::string(1, static_cast<char>(tag)), "'");
  }
  return absl::StrCat("0x", absl::Hex(tag, absl::kZeroPad2));
}

// ---------------------------------------------------------------------------------------------
// Reading one message. Every read checks the bytes left first; a failed read is an error that
// names the message, the relation where known, the field, and the byte offset.

class Parser {
 public:
  // `name` outlives the parser (a message name from kMessageNames).
  Parser(std::string_view payload, std::string_view name) : data_(payload), name_(name) {}

  size_t remaining() const { return data_.size() - pos_; }

  // Errors from here on name this object: "relation 16385".
  void set_subject(std::string_view kind, uint32_t oid) {
    subject_kind_ = kind;
    subject_oid_ = oid;
  }

  // Errors from here on are about item `index` of `count` (a tuple's or relation's column):
  // "new tuple column 2 of 3". `what` outlives the parser (a literal).
  void set_part(std::string_view what, size_t index, size_t count) {
    part_ = what;
    part_index_ = index;
    part_count_ = count;
  }
  void clear_part() { part_ = {}; }

  absl::Status error(std::string_view detail) const {
    std::string text = absl::StrCat("pgoutput ", av(name_));
    if (!subject_kind_.empty()) {
      absl::StrAppend(&text, " for ", av(subject_kind_), " ", subject_oid_);
    }
    if (!part_.empty()) {
      absl::StrAppend(&text, ", ", av(part_), " ", part_index_, " of ", part_count_);
    }
    absl::StrAppend(&text, ": ", av(detail), " (at byte ", pos_, " of ", data_.size(), ")");
    return absl::InvalidArgumentError(text);
  }

  absl::Status truncated(std::string_view field, size_t needed) const {
    return error(absl::StrCat("truncated: ", av(field), " needs ", needed, " bytes, ", remaining(),
                              " left"));
  }

  template <class T>
  absl::Status integer(T& out, std::string_view field) {
    static_assert(std::is_integral_v<T>);
    if (remaining() < sizeof(T)) {
      return truncated(field, sizeof(T));
    }
    out = static_cast<T>(load_be(data_.data() + pos_, sizeof(T)));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  // A NUL-terminated string (the NUL is consumed, not returned).
  absl::Status cstring(std::string_view& out, std::string_view field) {
    const char* start = data_.data() + pos_;
    const void* nul = remaining() == 0 ? nullptr : std::memchr(start, '\0', remaining());
    if (nul == nullptr) {
      return error(absl::StrCat("truncated: ", av(field), " has no terminating NUL in the ",
                                remaining(), " bytes left"));
    }
    const size_t length = static_cast<const char*>(nul) - start;
    out = std::string_view(start, length);
    pos_ += length + 1;
    return absl::OkStatus();
  }

  absl::Status bytes(size_t n, std::string_view& out, std::string_view field) {
    if (remaining() < n) {
      return truncated(field, n);
    }
    out = data_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status at_end() const {
    if (remaining() != 0) {
      return error(absl::StrCat(remaining(), " trailing bytes after the message"));
    }
    return absl::OkStatus();
  }

  // An Int32 length that must fit in what is left.
  absl::Status length(size_t& out, std::string_view field) {
    int32_t raw = 0;
    WEIR_RETURN_IF_ERROR(integer(raw, field));
    if (raw < 0) {
      return error(absl::StrCat(av(field), " is negative (", raw, ")"));
    }
    if (static_cast<size_t>(raw) > remaining()) {
      return error(
          absl::StrCat("truncated: ", av(field), " says ", raw, " bytes, ", remaining(), " left"));
    }
    out = static_cast<size_t>(raw);
    return absl::OkStatus();
  }

 private:
  std::string_view data_;
  size_t pos_ = 1;  // After the tag byte.
  std::string_view name_;
  std::string_view subject_kind_;
  uint32_t subject_oid_ = 0;
  std::string_view part_;
  size_t part_index_ = 0;
  size_t part_count_ = 0;
};

// Where a tuple's columns lie in DecodeScratch::tuple_columns (spans are made once the message
// is complete: the vector may grow while the second tuple of an Update is read).
struct TupleRange {
  size_t begin = 0;
  size_t count = 0;

  Tuple in(const DecodeScratch& scratch) const {
    return Tuple(scratch.tuple_columns.data() + begin, count);
  }
};

// `which` is "new", "old" or "old key".
absl::Status read_tuple(Parser& in, std::string_view which, DecodeScratch& scratch,
                        TupleRange& range) {
  const std::string_view column_part = which == "new"   ? "new tuple column"
                                       : which == "old" ? "old tuple column"
                                                        : "old key tuple column";
  if (in.remaining() < 2) {
    return in.truncated(absl::StrCat(av(which), " tuple's column count"), 2);
  }
  uint16_t count = 0;
  WEIR_RETURN_IF_ERROR(in.integer(count, "column count"));
  // Each column takes at least its kind byte: a count the bytes cannot hold is an error before
  // anything is reserved.
  if (count > in.remaining()) {
    return in.error(absl::StrCat(av(which), " tuple has ", count, " columns but only ",
                                 in.remaining(), " bytes follow"));
  }
  auto& columns = scratch.tuple_columns;
  range.begin = columns.size();
  range.count = count;
  columns.reserve(range.begin + count);
  for (size_t i = 0; i < count; ++i) {
    in.set_part(column_part, i, count);
    uint8_t kind = 0;
    WEIR_RETURN_IF_ERROR(in.integer(kind, "column kind"));
    switch (kind) {
      case 'n':
        columns.push_back({ColumnKind::kNull, {}});
        break;
      case 'u':
        columns.push_back({ColumnKind::kUnchangedToast, {}});
        break;
      case 't':
      case 'b': {
        size_t length = 0;
        std::string_view value;
        WEIR_RETURN_IF_ERROR(in.length(length, "value length"));
        WEIR_RETURN_IF_ERROR(in.bytes(length, value, "value"));
        columns.push_back({kind == 't' ? ColumnKind::kText : ColumnKind::kBinary, value});
        break;
      }
      default:
        return in.error(absl::StrCat("unknown column kind ", tag_text(kind),
                                     " (expected 'n', 'u', 't' or 'b')"));
    }
  }
  in.clear_part();
  return absl::OkStatus();
}

absl::Status read_xid(Parser& in, bool in_stream, std::optional<Xid>& xid) {
  if (in_stream) {
    Xid value = 0;
    WEIR_RETURN_IF_ERROR(in.integer(value, "xid"));
    xid = value;
  }
  return absl::OkStatus();
}

absl::Status read_relation_oid(Parser& in, uint32_t& oid) {
  WEIR_RETURN_IF_ERROR(in.integer(oid, "relation oid"));
  in.set_subject("relation", oid);
  return absl::OkStatus();
}

absl::StatusOr<Message> decode_begin(Parser& in) {
  Begin m;
  WEIR_RETURN_IF_ERROR(in.integer(m.final_lsn, "final lsn"));
  WEIR_RETURN_IF_ERROR(in.integer(m.commit_time, "commit time"));
  WEIR_RETURN_IF_ERROR(in.integer(m.xid, "xid"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::StatusOr<Message> decode_commit(Parser& in) {
  Commit m;
  WEIR_RETURN_IF_ERROR(in.integer(m.flags, "flags"));
  WEIR_RETURN_IF_ERROR(in.integer(m.commit_lsn, "commit lsn"));
  WEIR_RETURN_IF_ERROR(in.integer(m.end_lsn, "end lsn"));
  WEIR_RETURN_IF_ERROR(in.integer(m.commit_time, "commit time"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::StatusOr<Message> decode_origin(Parser& in) {
  Origin m;
  WEIR_RETURN_IF_ERROR(in.integer(m.commit_lsn, "origin commit lsn"));
  WEIR_RETURN_IF_ERROR(in.cstring(m.name, "origin name"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::StatusOr<Message> decode_relation(Parser& in, bool in_stream, DecodeScratch& scratch) {
  Relation m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  WEIR_RETURN_IF_ERROR(read_relation_oid(in, m.oid));
  WEIR_RETURN_IF_ERROR(in.cstring(m.namespace_name, "namespace"));
  WEIR_RETURN_IF_ERROR(in.cstring(m.name, "relation name"));
  uint8_t identity = 0;
  WEIR_RETURN_IF_ERROR(in.integer(identity, "replica identity"));
  switch (identity) {
    case 'd':
    case 'n':
    case 'f':
    case 'i':
      m.replica_identity = static_cast<ReplicaIdentity>(identity);
      break;
    default:
      return in.error(absl::StrCat("unknown replica identity ", tag_text(identity),
                                   " (expected 'd', 'n', 'f' or 'i')"));
  }
  uint16_t count = 0;
  WEIR_RETURN_IF_ERROR(in.integer(count, "column count"));
  // flags (1) + name (at least its NUL) + type oid (4) + type modifier (4).
  constexpr size_t kMinColumnBytes = 10;
  if (count > in.remaining() / kMinColumnBytes) {
    return in.error(absl::StrCat("relation has ", count, " columns but only ", in.remaining(),
                                 " bytes follow (each column takes at least ", kMinColumnBytes,
                                 ")"));
  }
  auto& columns = scratch.relation_columns;
  columns.clear();
  columns.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    in.set_part("column", i, count);
    RelationColumn column;
    WEIR_RETURN_IF_ERROR(in.integer(column.flags, "flags"));
    WEIR_RETURN_IF_ERROR(in.cstring(column.name, "name"));
    WEIR_RETURN_IF_ERROR(in.integer(column.type_oid, "type oid"));
    WEIR_RETURN_IF_ERROR(in.integer(column.type_modifier, "type modifier"));
    columns.push_back(column);
  }
  in.clear_part();
  WEIR_RETURN_IF_ERROR(in.at_end());
  m.columns = std::span<const RelationColumn>(columns.data(), columns.size());
  return m;
}

absl::StatusOr<Message> decode_type(Parser& in, bool in_stream) {
  Type m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  WEIR_RETURN_IF_ERROR(in.integer(m.oid, "type oid"));
  in.set_subject("type", m.oid);
  WEIR_RETURN_IF_ERROR(in.cstring(m.namespace_name, "namespace"));
  WEIR_RETURN_IF_ERROR(in.cstring(m.name, "type name"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::Status expect_tuple_tag(Parser& in, std::string_view expected_text, uint8_t& tag) {
  if (in.remaining() < 1) {
    return in.truncated(absl::StrCat("tuple tag (", av(expected_text), ")"), 1);
  }
  return in.integer(tag, "tuple tag");
}

absl::StatusOr<Message> decode_insert(Parser& in, bool in_stream, DecodeScratch& scratch) {
  Insert m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  WEIR_RETURN_IF_ERROR(read_relation_oid(in, m.relation_oid));
  uint8_t tag = 0;
  WEIR_RETURN_IF_ERROR(expect_tuple_tag(in, "'N'", tag));
  if (tag != 'N') {
    return in.error(absl::StrCat("expected 'N' (new tuple), got ", tag_text(tag)));
  }
  scratch.tuple_columns.clear();
  TupleRange range;
  WEIR_RETURN_IF_ERROR(read_tuple(in, "new", scratch, range));
  WEIR_RETURN_IF_ERROR(in.at_end());
  m.new_tuple = range.in(scratch);
  return m;
}

absl::StatusOr<Message> decode_update(Parser& in, bool in_stream, DecodeScratch& scratch) {
  Update m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  WEIR_RETURN_IF_ERROR(read_relation_oid(in, m.relation_oid));
  scratch.tuple_columns.clear();
  uint8_t tag = 0;
  WEIR_RETURN_IF_ERROR(expect_tuple_tag(in, "'K', 'O' or 'N'", tag));
  TupleRange old_range;
  if (tag == 'K' || tag == 'O') {
    m.old_kind = static_cast<OldTupleKind>(tag);
    WEIR_RETURN_IF_ERROR(read_tuple(in, tag == 'K' ? "old key" : "old", scratch, old_range));
    WEIR_RETURN_IF_ERROR(expect_tuple_tag(in, "'N'", tag));
    if (tag != 'N') {
      return in.error(
          absl::StrCat("expected 'N' (new tuple) after the old tuple, got ", tag_text(tag)));
    }
  } else if (tag != 'N') {
    return in.error(absl::StrCat("expected 'K' (old key), 'O' (old tuple) or 'N' (new tuple), got ",
                                 tag_text(tag)));
  }
  TupleRange new_range;
  WEIR_RETURN_IF_ERROR(read_tuple(in, "new", scratch, new_range));
  WEIR_RETURN_IF_ERROR(in.at_end());
  m.old_tuple = old_range.in(scratch);
  m.new_tuple = new_range.in(scratch);
  return m;
}

absl::StatusOr<Message> decode_delete(Parser& in, bool in_stream, DecodeScratch& scratch) {
  Delete m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  WEIR_RETURN_IF_ERROR(read_relation_oid(in, m.relation_oid));
  uint8_t tag = 0;
  WEIR_RETURN_IF_ERROR(expect_tuple_tag(in, "'K' or 'O'", tag));
  if (tag != 'K' && tag != 'O') {
    return in.error(absl::StrCat("expected 'K' (old key) or 'O' (old tuple), got ", tag_text(tag)));
  }
  m.old_kind = static_cast<OldTupleKind>(tag);
  scratch.tuple_columns.clear();
  TupleRange range;
  WEIR_RETURN_IF_ERROR(read_tuple(in, tag == 'K' ? "old key" : "old", scratch, range));
  WEIR_RETURN_IF_ERROR(in.at_end());
  m.old_tuple = range.in(scratch);
  return m;
}

absl::StatusOr<Message> decode_truncate(Parser& in, bool in_stream, DecodeScratch& scratch) {
  Truncate m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  int32_t count = 0;
  WEIR_RETURN_IF_ERROR(in.integer(count, "relation count"));
  uint8_t flags = 0;
  WEIR_RETURN_IF_ERROR(in.integer(flags, "flags"));
  if ((flags & ~3U) != 0) {
    return in.error(absl::StrCat("unknown flags 0x", absl::Hex(flags),
                                 " (known: 1 cascade, 2 restart identity)"));
  }
  m.cascade = (flags & 1U) != 0;
  m.restart_identity = (flags & 2U) != 0;
  if (count < 0 || static_cast<size_t>(count) != in.remaining() / 4 || in.remaining() % 4 != 0) {
    return in.error(absl::StrCat("relation count ", count, " does not match the ", in.remaining(),
                                 " bytes of relation oids that follow"));
  }
  auto& oids = scratch.relation_oids;
  oids.clear();
  oids.reserve(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    uint32_t oid = 0;
    WEIR_RETURN_IF_ERROR(in.integer(oid, "relation oid"));
    oids.push_back(oid);
  }
  WEIR_RETURN_IF_ERROR(in.at_end());
  m.relation_oids = std::span<const uint32_t>(oids.data(), oids.size());
  return m;
}

absl::StatusOr<Message> decode_logical_message(Parser& in, bool in_stream) {
  LogicalMessage m;
  WEIR_RETURN_IF_ERROR(read_xid(in, in_stream, m.xid));
  uint8_t flags = 0;
  WEIR_RETURN_IF_ERROR(in.integer(flags, "flags"));
  if ((flags & ~1U) != 0) {
    return in.error(
        absl::StrCat("unknown flags 0x", absl::Hex(flags), " (known: 1 transactional)"));
  }
  m.transactional = flags == 1;
  WEIR_RETURN_IF_ERROR(in.integer(m.lsn, "lsn"));
  WEIR_RETURN_IF_ERROR(in.cstring(m.prefix, "prefix"));
  size_t length = 0;
  WEIR_RETURN_IF_ERROR(in.length(length, "content length"));
  WEIR_RETURN_IF_ERROR(in.bytes(length, m.content, "content"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::StatusOr<Message> decode_stream_start(Parser& in) {
  StreamStart m;
  WEIR_RETURN_IF_ERROR(in.integer(m.xid, "xid"));
  uint8_t first = 0;
  WEIR_RETURN_IF_ERROR(in.integer(first, "first segment flag"));
  if (first > 1) {
    return in.error(absl::StrCat("first segment flag is ", first, " (expected 0 or 1)"));
  }
  m.first_segment = first == 1;
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::StatusOr<Message> decode_stream_commit(Parser& in) {
  StreamCommit m;
  WEIR_RETURN_IF_ERROR(in.integer(m.xid, "xid"));
  WEIR_RETURN_IF_ERROR(in.integer(m.flags, "flags"));
  WEIR_RETURN_IF_ERROR(in.integer(m.commit_lsn, "commit lsn"));
  WEIR_RETURN_IF_ERROR(in.integer(m.end_lsn, "end lsn"));
  WEIR_RETURN_IF_ERROR(in.integer(m.commit_time, "commit time"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

absl::StatusOr<Message> decode_stream_abort(Parser& in) {
  StreamAbort m;
  WEIR_RETURN_IF_ERROR(in.integer(m.xid, "xid"));
  WEIR_RETURN_IF_ERROR(in.integer(m.subxid, "subtransaction xid"));
  WEIR_RETURN_IF_ERROR(in.at_end());
  return m;
}

// ---------------------------------------------------------------------------------------------
// describe

constexpr size_t kDescribeValueBytes = 48;

void append_quoted(std::string& out, std::string_view value) {
  const bool shortened = value.size() > kDescribeValueBytes;
  out += '\'';
  out += absl::CHexEscape(av(value.substr(0, kDescribeValueBytes)));
  if (shortened) {
    absl::StrAppend(&out, "...' (", value.size(), " bytes)");
  } else {
    out += '\'';
  }
}

void append_tuple(std::string& out, std::string_view label, Tuple tuple) {
  absl::StrAppend(&out, " ", av(label), "=(");
  for (size_t i = 0; i < tuple.size(); ++i) {
    if (i > 0) {
      out += ", ";
    }
    const TupleColumn& column = tuple[i];
    switch (column.kind) {
      case ColumnKind::kNull:
        out += "NULL";
        break;
      case ColumnKind::kUnchangedToast:
        out += "unchanged-toast";
        break;
      case ColumnKind::kText:
        append_quoted(out, column.value);
        break;
      case ColumnKind::kBinary: {
        const bool shortened = column.value.size() > kDescribeValueBytes / 2;
        absl::StrAppend(&out, "x'",
                        absl::BytesToHexString(av(column.value.substr(0, kDescribeValueBytes / 2))),
                        shortened ? "...'" : "'");
        if (shortened) {
          absl::StrAppend(&out, " (", column.value.size(), " bytes)");
        }
        break;
      }
    }
  }
  out += ")";
}

void append_xid(std::string& out, const std::optional<Xid>& xid) {
  if (xid.has_value()) {
    absl::StrAppend(&out, " xid=", *xid);
  }
}

void append_name(std::string& out, std::string_view namespace_name, std::string_view name) {
  out += ' ';
  if (!namespace_name.empty()) {
    out += absl::CHexEscape(av(namespace_name));
    out += '.';
  }
  out += absl::CHexEscape(av(name));
}

std::string_view old_kind_name(OldTupleKind kind) {
  return kind == OldTupleKind::kFull ? "old" : "old_key";
}

struct Describer {
  std::string& out;

  void operator()(const Begin& m) {
    absl::StrAppend(&out, " final_lsn=", format_lsn(m.final_lsn), " commit_time=", m.commit_time,
                    " xid=", m.xid);
  }
  void operator()(const Commit& m) {
    absl::StrAppend(&out, " flags=", m.flags, " commit_lsn=", format_lsn(m.commit_lsn),
                    " end_lsn=", format_lsn(m.end_lsn), " commit_time=", m.commit_time);
  }
  void operator()(const Origin& m) {
    absl::StrAppend(&out, " commit_lsn=", format_lsn(m.commit_lsn), " name=");
    append_quoted(out, m.name);
  }
  void operator()(const Relation& m) {
    append_xid(out, m.xid);
    absl::StrAppend(&out, " oid=", m.oid);
    append_name(out, m.namespace_name, m.name);
    absl::StrAppend(&out,
                    " replica_identity=", std::string(1, static_cast<char>(m.replica_identity)),
                    " columns=(");
    for (size_t i = 0; i < m.columns.size(); ++i) {
      const RelationColumn& column = m.columns[i];
      absl::StrAppend(&out, i > 0 ? ", " : "", absl::CHexEscape(av(column.name)), " ",
                      column.type_oid);
      if (column.type_modifier != -1) {
        absl::StrAppend(&out, "(", column.type_modifier, ")");
      }
      if (column.is_key()) {
        out += " key";
      }
      if ((column.flags & ~1U) != 0) {
        absl::StrAppend(&out, " flags=", column.flags);
      }
    }
    out += ")";
  }
  void operator()(const Type& m) {
    append_xid(out, m.xid);
    absl::StrAppend(&out, " oid=", m.oid);
    append_name(out, m.namespace_name, m.name);
  }
  void operator()(const Insert& m) {
    append_xid(out, m.xid);
    absl::StrAppend(&out, " relation=", m.relation_oid);
    append_tuple(out, "new", m.new_tuple);
  }
  void operator()(const Update& m) {
    append_xid(out, m.xid);
    absl::StrAppend(&out, " relation=", m.relation_oid);
    if (m.old_kind != OldTupleKind::kNone) {
      append_tuple(out, old_kind_name(m.old_kind), m.old_tuple);
    }
    append_tuple(out, "new", m.new_tuple);
  }
  void operator()(const Delete& m) {
    append_xid(out, m.xid);
    absl::StrAppend(&out, " relation=", m.relation_oid);
    append_tuple(out, old_kind_name(m.old_kind), m.old_tuple);
  }
  void operator()(const Truncate& m) {
    append_xid(out, m.xid);
    out += " relations=(";
    for (size_t i = 0; i < m.relation_oids.size(); ++i) {
      absl::StrAppend(&out, i > 0 ? ", " : "", m.relation_oids[i]);
    }
    out += ")";
    if (m.cascade) {
      out += " cascade";
    }
    if (m.restart_identity) {
      out += " restart_identity";
    }
  }
  void operator()(const LogicalMessage& m) {
    append_xid(out, m.xid);
    absl::StrAppend(&out, m.transactional ? " transactional" : " non-transactional",
                    " lsn=", format_lsn(m.lsn), " prefix=");
    append_quoted(out, m.prefix);
    out += " content=";
    append_quoted(out, m.content);
  }
  void operator()(const StreamStart& m) {
    absl::StrAppend(&out, " xid=", m.xid, m.first_segment ? " first_segment" : "");
  }
  void operator()(const StreamStop& /*m*/) {}
  void operator()(const StreamCommit& m) {
    absl::StrAppend(&out, " xid=", m.xid, " flags=", m.flags,
                    " commit_lsn=", format_lsn(m.commit_lsn), " end_lsn=", format_lsn(m.end_lsn),
                    " commit_time=", m.commit_time);
  }
  void operator()(const StreamAbort& m) {
    absl::StrAppend(&out, " xid=", m.xid, " subxid=", m.subxid);
  }
};

constexpr std::string_view kMessageNames[] = {
    "Begin",        "Commit",      "Origin",        "Relation",    "Type",
    "Insert",       "Update",      "Delete",        "Truncate",    "Message",
    "Stream Start", "Stream Stop", "Stream Commit", "Stream Abort"};
constexpr char kMessageTags[] = {'B', 'C', 'O', 'R', 'Y', 'I', 'U',
                                 'D', 'T', 'M', 'S', 'E', 'c', 'A'};
static_assert(std::size(kMessageNames) == std::variant_size_v<Message>);
static_assert(std::size(kMessageTags) == std::variant_size_v<Message>);

std::string_view name_of_tag(unsigned char tag) {
  for (size_t i = 0; i < std::size(kMessageTags); ++i) {
    if (static_cast<unsigned char>(kMessageTags[i]) == tag) {
      return kMessageNames[i];
    }
  }
  return {};
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// LSNs and timestamps

absl::StatusOr<Lsn> parse_lsn(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("invalid LSN \"", absl::CHexEscape(av(text)),
                                                   "\": ", av(why),
                                                   " (expected X/Y, e.g. 0/16B3748)"));
  };
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    return bad("no '/'");
  }
  uint64_t halves[2] = {0, 0};
  const std::string_view parts[2] = {text.substr(0, slash), text.substr(slash + 1)};
  for (int h = 0; h < 2; ++h) {
    if (parts[h].empty() || parts[h].size() > 8) {
      return bad(h == 0 ? "the part before '/' must have 1 to 8 hexadecimal digits"
                        : "the part after '/' must have 1 to 8 hexadecimal digits");
    }
    for (char c : parts[h]) {
      int digit = 0;
      if (c >= '0' && c <= '9') {
        digit = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        digit = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        digit = c - 'A' + 10;
      } else {
        return bad("not a hexadecimal digit");
      }
      halves[h] = (halves[h] << 4) | static_cast<uint64_t>(digit);
    }
  }
  return (halves[0] << 32) | halves[1];
}

std::string format_lsn(Lsn lsn) {
  std::string out = absl::StrCat(absl::Hex(lsn >> 32), "/", absl::Hex(lsn & 0xffffffffU));
  for (char& c : out) {
    if (c >= 'a' && c <= 'f') {
      c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return out;
}

PgTimestamp pg_timestamp_now() {
  return to_pg_timestamp(
      std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now()));
}

// -----------------------------------------------------------------------------------------------
// The replication stream

namespace {
constexpr size_t kXLogDataHeaderSize = 1 + 3 * 8;
constexpr size_t kPrimaryKeepaliveSize = 1 + 2 * 8 + 1;
}  // namespace

absl::StatusOr<ReplicationMessage> parse_replication_message(std::string_view copy_data) {
  if (copy_data.empty()) {
    return absl::InvalidArgumentError("replication stream: empty CopyData message");
  }
  const char* p = copy_data.data();
  switch (copy_data[0]) {
    case 'w': {
      if (copy_data.size() < kXLogDataHeaderSize) {
        return absl::InvalidArgumentError(
            absl::StrCat("replication stream: truncated XLogData: ", copy_data.size(),
                         " bytes, the header alone takes ", kXLogDataHeaderSize));
      }
      XLogData data;
      data.wal_start = load_be(p + 1, 8);
      data.wal_end = load_be(p + 9, 8);
      data.send_time = static_cast<PgTimestamp>(load_be(p + 17, 8));
      data.payload = copy_data.substr(kXLogDataHeaderSize);
      return data;
    }
    case 'k': {
      if (copy_data.size() != kPrimaryKeepaliveSize) {
        return absl::InvalidArgumentError(
            absl::StrCat("replication stream: a primary keepalive has ", kPrimaryKeepaliveSize,
                         " bytes, this one ", copy_data.size()));
      }
      PrimaryKeepalive keepalive;
      keepalive.wal_end = load_be(p + 1, 8);
      keepalive.send_time = static_cast<PgTimestamp>(load_be(p + 9, 8));
      const auto reply = static_cast<unsigned char>(p[17]);
      if (reply > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "replication stream: primary keepalive's reply flag is ", reply, " (expected 0 or 1)"));
      }
      keepalive.reply_requested = reply == 1;
      return keepalive;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("replication stream: unknown message tag ",
                       tag_text(static_cast<unsigned char>(copy_data[0])),
                       " (expected 'w' XLogData or 'k' primary keepalive)"));
  }
}

void append_standby_status_update(const StandbyStatusUpdate& update, std::string& out) {
  out.push_back('r');
  append_be(out, update.written, 8);
  append_be(out, update.flushed, 8);
  append_be(out, update.applied, 8);
  append_be(out, static_cast<uint64_t>(update.clock), 8);
  out.push_back(update.reply_requested ? 1 : 0);
}

absl::StatusOr<StandbyStatusUpdate> parse_standby_status_update(std::string_view copy_data) {
  if (copy_data.size() != kStandbyStatusUpdateSize || copy_data[0] != 'r') {
    return absl::InvalidArgumentError(absl::StrCat(
        "replication stream: a standby status update is 'r' and ", kStandbyStatusUpdateSize - 1,
        " bytes; got ", copy_data.size(), " bytes starting with ",
        copy_data.empty() ? std::string("nothing")
                          : tag_text(static_cast<unsigned char>(copy_data[0]))));
  }
  const char* p = copy_data.data();
  StandbyStatusUpdate update;
  update.written = load_be(p + 1, 8);
  update.flushed = load_be(p + 9, 8);
  update.applied = load_be(p + 17, 8);
  update.clock = static_cast<PgTimestamp>(load_be(p + 25, 8));
  const auto reply = static_cast<unsigned char>(p[33]);
  if (reply > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replication stream: standby status update's reply flag is ", reply, " (expected 0 or 1)"));
  }
  update.reply_requested = reply == 1;
  return update;
}

void append_xlog_data(const XLogData& data, std::string& out) {
  out.push_back('w');
  append_be(out, data.wal_start, 8);
  append_be(out, data.wal_end, 8);
  append_be(out, static_cast<uint64_t>(data.send_time), 8);
  out.append(data.payload);
}

void append_primary_keepalive(const PrimaryKeepalive& keepalive, std::string& out) {
  out.push_back('k');
  append_be(out, keepalive.wal_end, 8);
  append_be(out, static_cast<uint64_t>(keepalive.send_time), 8);
  out.push_back(keepalive.reply_requested ? 1 : 0);
}

// -----------------------------------------------------------------------------------------------
// pgoutput messages

absl::StatusOr<Message> decode_message(std::string_view payload, bool in_stream,
                                       DecodeScratch& scratch) {
  if (payload.empty()) {
    return absl::InvalidArgumentError("pgoutput: empty message");
  }
  const auto tag = static_cast<unsigned char>(payload[0]);
  const std::string_view name = name_of_tag(tag);
  if (name.empty()) {
    std::string hint;
    switch (tag) {
      case 'b':
      case 'P':
      case 'K':
      case 'r':
      case 'p':
        hint = " (a two-phase commit message: not supported, do not enable two_phase)";
        break;
      case 'w':
      case 'k':
        hint = " (a replication stream message: decode XLogData::payload, not the CopyData)";
        break;
      default:
        break;
    }
    return absl::InvalidArgumentError(absl::StrCat("pgoutput: unknown message tag ", tag_text(tag),
                                                   " in a message of ", payload.size(), " bytes",
                                                   hint));
  }
  Parser in(payload, name);
  switch (tag) {
    case 'B':
      return decode_begin(in);
    case 'C':
      return decode_commit(in);
    case 'O':
      return decode_origin(in);
    case 'R':
      return decode_relation(in, in_stream, scratch);
    case 'Y':
      return decode_type(in, in_stream);
    case 'I':
      return decode_insert(in, in_stream, scratch);
    case 'U':
      return decode_update(in, in_stream, scratch);
    case 'D':
      return decode_delete(in, in_stream, scratch);
    case 'T':
      return decode_truncate(in, in_stream, scratch);
    case 'M':
      return decode_logical_message(in, in_stream);
    case 'S':
      return decode_stream_start(in);
    case 'E': {
      WEIR_RETURN_IF_ERROR(in.at_end());
      return StreamStop{};
    }
    case 'c':
      return decode_stream_commit(in);
    case 'A':
      return decode_stream_abort(in);
    default:
      break;
  }
  return absl::InternalError(absl::StrCat("pgoutput: tag ", tag_text(tag), " has no decoder"));
}

absl::StatusOr<Message> PgOutputDecoder::decode(std::string_view payload) {
  WEIR_ASSIGN_OR_RETURN(Message message, decode_message(payload, in_stream_, scratch_));
  const auto misplaced = [&](std::string_view where) {
    return absl::InvalidArgumentError(absl::StrCat("pgoutput ", av(message_name(message)), " ",
                                                   av(where), ": ", describe(message)));
  };
  const bool is_streaming =
      std::holds_alternative<StreamStart>(message) || std::holds_alternative<StreamStop>(message) ||
      std::holds_alternative<StreamCommit>(message) || std::holds_alternative<StreamAbort>(message);
  if (is_streaming && protocol_version_ < 2) {
    return misplaced(
        absl::StrCat("under protocol version ", protocol_version_, " (streaming needs 2)"));
  }
  if (std::holds_alternative<StreamStart>(message)) {
    if (in_stream_) {
      return misplaced("inside a stream (no Stream Stop since the last Stream Start)");
    }
    in_stream_ = true;
  } else if (std::holds_alternative<StreamStop>(message)) {
    if (!in_stream_) {
      return misplaced("outside a stream");
    }
    in_stream_ = false;
  } else if (in_stream_ &&
             (std::holds_alternative<Begin>(message) || std::holds_alternative<Commit>(message) ||
              std::holds_alternative<StreamCommit>(message) ||
              std::holds_alternative<StreamAbort>(message))) {
    return misplaced("inside a stream (between Stream Start and Stream Stop)");
  }
  return message;
}

namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { append_be(out_, v, 2); }
  void u32(uint32_t v) { append_be(out_, v, 4); }
  void u64(uint64_t v) { append_be(out_, v, 8); }
  void cstring(std::string_view s) {
    out_.append(s);
    out_.push_back('\0');
  }
  void xid(const std::optional<Xid>& x) {
    if (x.has_value()) {
      u32(*x);
    }
  }
  void tuple(Tuple t) {
    u16(static_cast<uint16_t>(t.size()));
    for (const TupleColumn& column : t) {
      u8(static_cast<uint8_t>(column.kind));
      if (column.kind == ColumnKind::kText || column.kind == ColumnKind::kBinary) {
        u32(static_cast<uint32_t>(column.value.size()));
        out_.append(column.value);
      }
    }
  }

  void operator()(const Begin& m) {
    u64(m.final_lsn);
    u64(static_cast<uint64_t>(m.commit_time));
    u32(m.xid);
  }
  void operator()(const Commit& m) {
    u8(m.flags);
    u64(m.commit_lsn);
    u64(m.end_lsn);
    u64(static_cast<uint64_t>(m.commit_time));
  }
  void operator()(const Origin& m) {
    u64(m.commit_lsn);
    cstring(m.name);
  }
  void operator()(const Relation& m) {
    xid(m.xid);
    u32(m.oid);
    cstring(m.namespace_name);
    cstring(m.name);
    u8(static_cast<uint8_t>(m.replica_identity));
    u16(static_cast<uint16_t>(m.columns.size()));
    for (const RelationColumn& column : m.columns) {
      u8(column.flags);
      cstring(column.name);
      u32(column.type_oid);
      u32(static_cast<uint32_t>(column.type_modifier));
    }
  }
  void operator()(const Type& m) {
    xid(m.xid);
    u32(m.oid);
    cstring(m.namespace_name);
    cstring(m.name);
  }
  void operator()(const Insert& m) {
    xid(m.xid);
    u32(m.relation_oid);
    u8('N');
    tuple(m.new_tuple);
  }
  void operator()(const Update& m) {
    xid(m.xid);
    u32(m.relation_oid);
    if (m.old_kind != OldTupleKind::kNone) {
      u8(static_cast<uint8_t>(m.old_kind));
      tuple(m.old_tuple);
    }
    u8('N');
    tuple(m.new_tuple);
  }
  void operator()(const Delete& m) {
    xid(m.xid);
    u32(m.relation_oid);
    u8(static_cast<uint8_t>(m.old_kind));
    tuple(m.old_tuple);
  }
  void operator()(const Truncate& m) {
    xid(m.xid);
    u32(static_cast<uint32_t>(m.relation_oids.size()));
    u8(static_cast<uint8_t>((m.cascade ? 1 : 0) | (m.restart_identity ? 2 : 0)));
    for (uint32_t oid : m.relation_oids) {
      u32(oid);
    }
  }
  void operator()(const LogicalMessage& m) {
    xid(m.xid);
    u8(m.transactional ? 1 : 0);
    u64(m.lsn);
    cstring(m.prefix);
    u32(static_cast<uint32_t>(m.content.size()));
    out_.append(m.content);
  }
  void operator()(const StreamStart& m) {
    u32(m.xid);
    u8(m.first_segment ? 1 : 0);
  }
  void operator()(const StreamStop& /*m*/) {}
  void operator()(const StreamCommit& m) {
    u32(m.xid);
    u8(m.flags);
    u64(m.commit_lsn);
    u64(m.end_lsn);
    u64(static_cast<uint64_t>(m.commit_time));
  }
  void operator()(const StreamAbort& m) {
    u32(m.xid);
    u32(m.subxid);
  }

 private:
  std::string& out_;
};

}  // namespace

void append_message(const Message& message, std::string& out) {
  out.push_back(message_tag(message));
  std::visit(Writer(out), message);
}

char message_tag(const Message& message) { return kMessageTags[message.index()]; }

std::string_view message_name(const Message& message) { return kMessageNames[message.index()]; }

std::optional<uint32_t> relation_oid(const Message& message) {
  return std::visit(
      [](const auto& m) -> std::optional<uint32_t> {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Relation>) {
          return m.oid;
        } else if constexpr (std::is_same_v<M, Insert> || std::is_same_v<M, Update> ||
                             std::is_same_v<M, Delete>) {
          return m.relation_oid;
        } else {
          return std::nullopt;
        }
      },
      message);
}

std::string describe(const Message& message) {
  std::string out(message_name(message));
  std::visit(Describer{out}, message);
  return out;
}

std::string describe(const ReplicationMessage& message) {
  if (const auto* data = std::get_if<XLogData>(&message)) {
    return absl::StrCat("XLogData wal_start=", format_lsn(data->wal_start),
                        " wal_end=", format_lsn(data->wal_end), " send_time=", data->send_time,
                        " payload=", data->payload.size(), " bytes");
  }
  const auto& keepalive = std::get<PrimaryKeepalive>(message);
  return absl::StrCat("PrimaryKeepalive wal_end=", format_lsn(keepalive.wal_end),
                      " send_time=", keepalive.send_time,
                      keepalive.reply_requested ? " reply_requested" : "");
}

}  // namespace weir::sources::postgres
