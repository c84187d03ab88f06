// Tests of the pgoutput decoder and the replication stream's framing. The *Postgres* tests
// capture real pgoutput messages from the PostgreSQL of the `postgres` CTest fixture without a
// replication connection: a temporary slot, DML, then pg_logical_slot_peek_binary_changes, which
// returns each message as bytea. With WEIR_PGOUTPUT_SEED_DIR set they also write what they
// captured there as fuzz seeds (sources/fuzz/pgoutput/seeds/ holds a committed set).

#include "weir/sources/postgres/pgoutput.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../support/postgres/postgres_url.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include <libpq-fe.h>

namespace weir::sources::postgres {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// -----------------------------------------------------------------------------------------------
// Building messages by hand

class Bytes {
 public:
  Bytes& u8(uint64_t v) { return be(v, 1); }
  Bytes& u16(uint64_t v) { return be(v, 2); }
  Bytes& u32(uint64_t v) { return be(v, 4); }
  Bytes& u64(uint64_t v) { return be(v, 8); }
  Bytes& str(std::string_view s) {
    out_.append(s);
    out_.push_back('\0');
    return *this;
  }
  Bytes& raw(std::string_view s) {
    out_.append(s);
    return *this;
  }
  Bytes& text_column(std::string_view s) {
    u8('t').u32(s.size());
    return raw(s);
  }
  const std::string& str() const { return out_; }

 private:
  Bytes& be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) {
      out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    return *this;
  }
  std::string out_;
};

// The cells of a tuple as strings: NULL, <toast> for unchanged TOAST, x:<hex> for binary.
std::vector<std::string> cells(Tuple tuple) {
  std::vector<std::string> out;
  for (const TupleColumn& column : tuple) {
    switch (column.kind) {
      case ColumnKind::kNull:
        out.emplace_back("NULL");
        break;
      case ColumnKind::kUnchangedToast:
        out.emplace_back("<toast>");
        break;
      case ColumnKind::kText:
        out.emplace_back(column.value);
        break;
      case ColumnKind::kBinary: {
        std::string hex = "x:";
        for (unsigned char c : column.value) {
          static constexpr char kDigits[] = "0123456789abcdef";
          hex += kDigits[c >> 4];
          hex += kDigits[c & 15];
        }
        out.push_back(hex);
        break;
      }
    }
  }
  return out;
}

// Fails unless every view of `message` lies inside `payload` or `scratch`'s buffers, and reads
// every byte it views (under a sanitizer, an over-read shows).
void expect_views_inside(const Message& message, std::string_view payload) {
  const char* begin = payload.data();
  const char* end = payload.data() + payload.size();
  size_t sum = 0;
  auto inside = [&](std::string_view view, const char* what) {
    if (view.empty()) {
      return;
    }
    EXPECT_TRUE(view.data() >= begin && view.data() + view.size() <= end)
        << what << " views outside the payload";
    for (char c : view) {
      sum += static_cast<unsigned char>(c);
    }
  };
  auto tuple = [&](Tuple t) {
    for (const TupleColumn& column : t) {
      inside(column.value, "a tuple column");
      if (column.kind == ColumnKind::kNull || column.kind == ColumnKind::kUnchangedToast) {
        EXPECT_TRUE(column.value.empty());
      }
    }
  };
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Origin>) {
          inside(m.name, "an origin name");
        } else if constexpr (std::is_same_v<M, Relation>) {
          inside(m.namespace_name, "a namespace");
          inside(m.name, "a relation name");
          for (const RelationColumn& column : m.columns) {
            inside(column.name, "a column name");
          }
        } else if constexpr (std::is_same_v<M, Type>) {
          inside(m.namespace_name, "a namespace");
          inside(m.name, "a type name");
        } else if constexpr (std::is_same_v<M, Insert>) {
          tuple(m.new_tuple);
        } else if constexpr (std::is_same_v<M, Update>) {
          tuple(m.old_tuple);
          tuple(m.new_tuple);
        } else if constexpr (std::is_same_v<M, Delete>) {
          tuple(m.old_tuple);
        } else if constexpr (std::is_same_v<M, LogicalMessage>) {
          inside(m.prefix, "a prefix");
          inside(m.content, "a content");
        } else if constexpr (std::is_same_v<M, Truncate>) {
          for (uint32_t oid : m.relation_oids) {
            sum += oid;
          }
        }
      },
      message);
  EXPECT_FALSE(describe(message).empty()) << sum;
}

// -----------------------------------------------------------------------------------------------
// LSNs, timestamps and framing

TEST(PgOutputLsnTest, ParsesAndFormatsPostgresText) {
  EXPECT_EQ(*parse_lsn("0/0"), 0U);
  EXPECT_EQ(*parse_lsn("16/B374D848"), 0x16B374D848ULL);
  EXPECT_EQ(*parse_lsn("16/b374d848"), 0x16B374D848ULL);
  EXPECT_EQ(*parse_lsn("FFFFFFFF/FFFFFFFF"), ~0ULL);
  EXPECT_EQ(*parse_lsn("00000001/00000002"), 0x100000002ULL);
  EXPECT_EQ(format_lsn(0), "0/0");
  EXPECT_EQ(format_lsn(0x16B374D848ULL), "16/B374D848");
  EXPECT_EQ(format_lsn(~0ULL), "FFFFFFFF/FFFFFFFF");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const Lsn lsn = rng() >> (rng() % 64);
    ASSERT_EQ(*parse_lsn(format_lsn(lsn)), lsn) << format_lsn(lsn);
  }
}

TEST(PgOutputLsnTest, RefusesMalformedText) {
  for (std::string_view bad : {"", "/", "0/", "/0", "0", "123456789/0", "0/123456789", "0/G",
                               "0x1/0", "0/1/2", " 0/1", "0/1 ", "-1/0", "+1/0", "0//1"}) {
    const auto lsn = parse_lsn(bad);
    ASSERT_FALSE(lsn.ok()) << "\"" << bad << "\" parsed as " << *lsn;
    EXPECT_EQ(lsn.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(lsn.status().message()), HasSubstr("invalid LSN"));
  }
}

TEST(PgOutputTimestampTest, CountsMicrosecondsFrom2000) {
  using std::chrono::microseconds;
  EXPECT_EQ(from_pg_timestamp(0).time_since_epoch(), microseconds(946'684'800'000'000));
  const SystemMicros time = from_pg_timestamp(123'456'789);
  EXPECT_EQ(to_pg_timestamp(time), 123'456'789);
  // 2026 is between 26 and 27 years after 2000.
  const int64_t years = pg_timestamp_now() / (365LL * 24 * 3600 * 1'000'000);
  EXPECT_GE(years, 20);
  EXPECT_LE(years, 100);
}

TEST(PgOutputFramingTest, XLogDataRoundTrips) {
  const std::string payload = Bytes().u8('E').str();
  std::string copy_data;
  append_xlog_data({.wal_start = 0x1234, .wal_end = 0x5678, .send_time = -3, .payload = payload},
                   copy_data);
  ASSERT_EQ(copy_data.size(), 25 + payload.size());
  const auto parsed = parse_replication_message(copy_data);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& data = std::get<XLogData>(*parsed);
  EXPECT_EQ(data.wal_start, 0x1234U);
  EXPECT_EQ(data.wal_end, 0x5678U);
  EXPECT_EQ(data.send_time, -3);
  EXPECT_EQ(data.payload, payload);
  EXPECT_EQ(data.payload.data(), copy_data.data() + 25);  // A view, not a copy.
  EXPECT_THAT(describe(*parsed), HasSubstr("XLogData wal_start=0/1234"));
  for (size_t n = 0; n < 25; ++n) {
    const auto truncated = parse_replication_message(std::string_view(copy_data).substr(0, n));
    EXPECT_FALSE(truncated.ok()) << n;
  }
}

TEST(PgOutputFramingTest, KeepaliveRoundTrips) {
  for (bool reply : {false, true}) {
    std::string copy_data;
    append_primary_keepalive(
        {.wal_end = 0xABCDEF0123ULL, .send_time = 42, .reply_requested = reply}, copy_data);
    ASSERT_EQ(copy_data.size(), 18U);
    const auto parsed = parse_replication_message(copy_data);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const auto& keepalive = std::get<PrimaryKeepalive>(*parsed);
    EXPECT_EQ(keepalive.wal_end, 0xABCDEF0123ULL);
    EXPECT_EQ(keepalive.send_time, 42);
    EXPECT_EQ(keepalive.reply_requested, reply);
    for (size_t n = 0; n < copy_data.size(); ++n) {
      EXPECT_FALSE(parse_replication_message(std::string_view(copy_data).substr(0, n)).ok()) << n;
    }
    EXPECT_FALSE(parse_replication_message(copy_data + "x").ok());
  }
  std::string bad_flag;
  append_primary_keepalive({.wal_end = 1, .send_time = 2}, bad_flag);
  bad_flag.back() = 2;
  EXPECT_THAT(std::string(parse_replication_message(bad_flag).status().message()),
              HasSubstr("reply flag"));
}

TEST(PgOutputFramingTest, StandbyStatusUpdateRoundTrips) {
  const StandbyStatusUpdate update{.written = 0x300000010ULL,
                                   .flushed = 0x300000008ULL,
                                   .applied = 0x300000008ULL,
                                   .clock = pg_timestamp_now(),
                                   .reply_requested = true};
  std::string out = "prefix";
  append_standby_status_update(update, out);
  ASSERT_EQ(out.size(), 6 + kStandbyStatusUpdateSize);
  const std::string_view message = std::string_view(out).substr(6);
  EXPECT_EQ(message[0], 'r');
  const auto parsed = parse_standby_status_update(message);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->written, update.written);
  EXPECT_EQ(parsed->flushed, update.flushed);
  EXPECT_EQ(parsed->applied, update.applied);
  EXPECT_EQ(parsed->clock, update.clock);
  EXPECT_TRUE(parsed->reply_requested);
  // The documented layout: Byte1('r'), Int64 x 4, Byte1.
  EXPECT_EQ(message.substr(1, 8), std::string_view("\x00\x00\x00\x03\x00\x00\x00\x10", 8));
  EXPECT_EQ(message.back(), 1);
  EXPECT_FALSE(parse_standby_status_update(message.substr(0, 33)).ok());
  EXPECT_FALSE(parse_standby_status_update("").ok());
}

TEST(PgOutputFramingTest, RefusesUnknownTags) {
  const auto parsed = parse_replication_message("x123");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("unknown message tag 'x'"));
  EXPECT_FALSE(parse_replication_message("").ok());
}

// -----------------------------------------------------------------------------------------------
// Hand-built pgoutput messages

TEST(PgOutputDecodeTest, DecodesAnUpdateWithOldAndNewTuples) {
  const std::string payload = Bytes()
                                  .u8('U')
                                  .u32(16385)
                                  .u8('O')
                                  .u16(3)
                                  .text_column("1")
                                  .u8('n')
                                  .u8('u')
                                  .u8('N')
                                  .u16(3)
                                  .text_column("2")
                                  .u8('b')
                                  .u32(2)
                                  .raw("\x01\xff")
                                  .u8('u')
                                  .str();
  DecodeScratch scratch;
  const auto message = decode_message(payload, /*in_stream=*/false, scratch);
  ASSERT_TRUE(message.ok()) << message.status();
  const auto& update = std::get<Update>(*message);
  EXPECT_FALSE(update.xid.has_value());
  EXPECT_EQ(update.relation_oid, 16385U);
  EXPECT_EQ(update.old_kind, OldTupleKind::kFull);
  EXPECT_THAT(cells(update.old_tuple), ElementsAre("1", "NULL", "<toast>"));
  EXPECT_THAT(cells(update.new_tuple), ElementsAre("2", "x:01ff", "<toast>"));
  EXPECT_EQ(message_tag(*message), 'U');
  EXPECT_EQ(relation_oid(*message), 16385U);
  EXPECT_EQ(describe(*message),
            "Update relation=16385 old=('1', NULL, unchanged-toast) "
            "new=('2', x'01ff', unchanged-toast)");
  std::string encoded;
  append_message(*message, encoded);
  EXPECT_EQ(encoded, payload);
}

TEST(PgOutputDecodeTest, ReadsTheXidOfMessagesInsideAStream) {
  const std::string insert =
      Bytes().u8('I').u32(777).u32(16385).u8('N').u16(1).text_column("v").str();
  PgOutputDecoder decoder(2);
  ASSERT_TRUE(decoder.decode(Bytes().u8('S').u32(777).u8(1).str()).ok());
  EXPECT_TRUE(decoder.in_stream());
  const auto message = decoder.decode(insert);
  ASSERT_TRUE(message.ok()) << message.status();
  EXPECT_EQ(std::get<Insert>(*message).xid, 777U);
  EXPECT_EQ(std::get<Insert>(*message).relation_oid, 16385U);
  EXPECT_THAT(cells(std::get<Insert>(*message).new_tuple), ElementsAre("v"));
  // Begin inside a stream, and a second Stream Start, are refused; the state stays.
  EXPECT_FALSE(decoder.decode(Bytes().u8('B').u64(1).u64(2).u32(3).str()).ok());
  EXPECT_FALSE(decoder.decode(Bytes().u8('S').u32(778).u8(0).str()).ok());
  EXPECT_TRUE(decoder.in_stream());
  ASSERT_TRUE(decoder.decode("E").ok());
  EXPECT_FALSE(decoder.in_stream());
  // Outside the stream the same bytes read as relation 777 with 4 trailing bytes... refused.
  const auto outside = decoder.decode(insert);
  ASSERT_FALSE(outside.ok());
  EXPECT_FALSE(decoder.decode("E").ok());
  const auto commit = decoder.decode(Bytes().u8('c').u32(777).u8(0).u64(10).u64(20).u64(30).str());
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(std::get<StreamCommit>(*commit).xid, 777U);
  EXPECT_EQ(std::get<StreamCommit>(*commit).end_lsn, 20U);
}

TEST(PgOutputDecodeTest, RefusesStreamingUnderProtocol1) {
  PgOutputDecoder decoder(1);
  const auto message = decoder.decode(Bytes().u8('S').u32(777).u8(1).str());
  ASSERT_FALSE(message.ok());
  EXPECT_THAT(std::string(message.status().message()), HasSubstr("protocol version 1"));
  EXPECT_FALSE(decoder.in_stream());
}

TEST(PgOutputDecodeTest, OversizedCountsFailBeforeAllocating) {
  DecodeScratch scratch;
  // 65535 columns announced by a 10-byte Insert.
  const std::string insert = Bytes().u8('I').u32(16385).u8('N').u16(65535).u8('n').u8('n').str();
  ASSERT_EQ(insert.size(), 10U);
  auto message = decode_message(insert, false, scratch);
  ASSERT_FALSE(message.ok());
  EXPECT_THAT(std::string(message.status().message()),
              HasSubstr("pgoutput Insert for relation 16385: new tuple has 65535 columns"));
  EXPECT_EQ(scratch.tuple_columns.capacity(), 0U);

  const std::string relation =
      Bytes().u8('R').u32(16390).str("public").str("t").u8('d').u16(65535).u8(1).str("id").str();
  message = decode_message(relation, false, scratch);
  ASSERT_FALSE(message.ok());
  EXPECT_THAT(std::string(message.status().message()), HasSubstr("relation 16390"));
  EXPECT_EQ(scratch.relation_columns.capacity(), 0U);

  const std::string truncate = Bytes().u8('T').u32(0x7fffffff).u8(0).u32(1).str();
  message = decode_message(truncate, false, scratch);
  ASSERT_FALSE(message.ok());
  EXPECT_THAT(std::string(message.status().message()), HasSubstr("relation count 2147483647"));
  EXPECT_EQ(scratch.relation_oids.capacity(), 0U);

  const std::string negative = Bytes().u8('T').u32(0xffffffff).u8(0).str();
  EXPECT_FALSE(decode_message(negative, false, scratch).ok());

  // Lengths beyond the message, and negative ones.
  for (uint32_t length : {0x7fffffffU, 0xffffffffU, 2U}) {
    const std::string text =
        Bytes().u8('I').u32(16385).u8('N').u16(1).u8('t').u32(length).raw("a").str();
    message = decode_message(text, false, scratch);
    ASSERT_FALSE(message.ok()) << length;
    EXPECT_THAT(std::string(message.status().message()),
                HasSubstr("for relation 16385, new tuple column 0 of 1"));
    const std::string content = Bytes().u8('M').u8(1).u64(5).str("p").u32(length).raw("a").str();
    EXPECT_FALSE(decode_message(content, false, scratch).ok()) << length;
  }
}

TEST(PgOutputDecodeTest, RefusesMalformedMessages) {
  DecodeScratch scratch;
  auto error = [&](const std::string& payload, bool in_stream = false) {
    const auto message = decode_message(payload, in_stream, scratch);
    EXPECT_FALSE(message.ok()) << describe(*message);
    return message.ok() ? std::string() : std::string(message.status().message());
  };
  EXPECT_THAT(error(""), HasSubstr("empty message"));
  EXPECT_THAT(error("Z"), HasSubstr("unknown message tag 'Z'"));
  EXPECT_THAT(error("P"), HasSubstr("two-phase"));
  EXPECT_THAT(error(std::string("w") + std::string(30, '\0')), HasSubstr("XLogData::payload"));
  EXPECT_THAT(error(Bytes().u8('E').u8(0).str()), HasSubstr("1 trailing bytes"));
  EXPECT_THAT(error(Bytes().u8('I').u32(16385).u8('X').str()),
              HasSubstr("Insert for relation 16385: expected 'N' (new tuple), got 'X'"));
  EXPECT_THAT(error(Bytes().u8('I').u32(16385).u8('N').u16(2).u8('n').u8('q').str()),
              HasSubstr("new tuple column 1 of 2: unknown column kind 'q'"));
  EXPECT_THAT(error(Bytes().u8('I').u32(16385).u8('N').u16(1).u8('n').u8('n').str()),
              HasSubstr("1 trailing bytes"));
  EXPECT_THAT(error(Bytes().u8('U').u32(9).u8('K').u16(1).u8('n').u8('K').str()),
              HasSubstr("for relation 9: expected 'N' (new tuple) after the old tuple, got 'K'"));
  EXPECT_THAT(error(Bytes().u8('D').u32(9).u8('N').u16(0).str()),
              HasSubstr("expected 'K' (old key) or 'O' (old tuple), got 'N'"));
  EXPECT_THAT(error(Bytes().u8('R').u32(9).str("s").str("t").u8('x').u16(0).str()),
              HasSubstr("unknown replica identity 'x'"));
  EXPECT_THAT(error(Bytes().u8('R').u32(9).str("s").raw("t").str()),
              HasSubstr("relation name has no terminating NUL"));
  EXPECT_THAT(error(Bytes().u8('T').u32(1).u8(4).u32(9).str()), HasSubstr("unknown flags 0x4"));
  EXPECT_THAT(error(Bytes().u8('T').u32(2).u8(0).u32(9).str()),
              HasSubstr("relation count 2 does not match"));
  EXPECT_THAT(error(Bytes().u8('M').u8(2).u64(5).str("p").u32(0).str()),
              HasSubstr("unknown flags 0x2"));
  EXPECT_THAT(error(Bytes().u8('S').u32(5).u8(2).str()), HasSubstr("first segment flag is 2"));
}

// -----------------------------------------------------------------------------------------------
// Real messages from PostgreSQL

std::string postgres_url() { return weir::testing::postgres_test_url(); }

struct Captured {
  Lsn lsn = 0;
  std::string data;
};

// A captured message, decoded; `message` views `data` and `scratch` (hence not movable).
struct Decoded {
  Decoded() = default;
  Decoded(const Decoded&) = delete;
  Decoded& operator=(const Decoded&) = delete;
  Decoded(Decoded&&) = delete;
  Decoded& operator=(Decoded&&) = delete;
  ~Decoded() = default;

  Lsn lsn = 0;
  std::string data;
  bool in_stream = false;
  DecodeScratch scratch;
  Message message;
};

using DecodedList = std::vector<std::unique_ptr<Decoded>>;

// The tag of each message: "BRIIC" for Begin, Relation, two Inserts, Commit.
std::string tags(const DecodedList& list) {
  std::string out;
  for (const auto& d : list) {
    out += message_tag(d->message);
  }
  return out;
}

template <class T>
std::vector<const T*> all_of(const DecodedList& list) {
  std::vector<const T*> out;
  for (const auto& d : list) {
    if (const T* m = std::get_if<T>(&d->message)) {
      out.push_back(m);
    }
  }
  return out;
}

std::vector<std::string> column_names(const Relation& relation) {
  std::vector<std::string> out;
  for (const RelationColumn& column : relation.columns) {
    out.emplace_back(column.name);
  }
  return out;
}

// Drops what other tests running at the same time (ctest -j) add to a capture: pgoutput sends
// Stream Start/Stop, Stream Commit/Abort and logical messages whatever the publication. Keeps the
// stream blocks of `streamed_xid` (all, if nullopt) and the messages with `prefix` (all, if
// empty), then drops the Begin/Commit pairs left empty.
DecodedList without_foreign(DecodedList list, std::optional<Xid> streamed_xid,
                            std::string_view prefix = {}) {
  DecodedList kept;
  bool in_foreign_block = false;
  for (auto& d : list) {
    const Message& m = d->message;
    bool keep = !in_foreign_block;
    if (const auto* start = std::get_if<StreamStart>(&m)) {
      in_foreign_block = streamed_xid.has_value() && start->xid != *streamed_xid;
      keep = !in_foreign_block;
    } else if (std::holds_alternative<StreamStop>(m)) {
      in_foreign_block = false;
    } else if (const auto* commit = std::get_if<StreamCommit>(&m)) {
      keep = !streamed_xid.has_value() || commit->xid == *streamed_xid;
    } else if (const auto* abort = std::get_if<StreamAbort>(&m)) {
      keep = !streamed_xid.has_value() || abort->xid == *streamed_xid;
    } else if (const auto* message = std::get_if<LogicalMessage>(&m)) {
      keep = keep && (prefix.empty() || message->prefix == prefix);
    }
    if (keep) {
      kept.push_back(std::move(d));
    }
  }
  DecodedList out;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (i + 1 < kept.size() && std::holds_alternative<Begin>(kept[i]->message) &&
        std::holds_alternative<Commit>(kept[i + 1]->message)) {
      ++i;
      continue;
    }
    out.push_back(std::move(kept[i]));
  }
  return out;
}

class PostgresPgOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string url = postgres_url();
    ASSERT_FALSE(url.empty());
    conn_ = PQconnectdb(url.c_str());
    ASSERT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
    std::random_device random;
    suffix_ = std::to_string(std::uniform_int_distribution<uint64_t>(0, 1ULL << 40)(random));
    schema_ = "pgo_" + suffix_;
    exec("SET client_min_messages = warning");
    exec("CREATE SCHEMA " + schema_);
    exec("SET search_path TO " + schema_);
  }

  void TearDown() override {
    write_seeds();
    if (conn_ != nullptr) {
      if (slot_created_) {
        exec("SELECT pg_drop_replication_slot('" + slot() + "')");
      }
      exec("DROP PUBLICATION IF EXISTS " + publication());
      exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
      PQfinish(conn_);
    }
  }

  std::string slot() const { return "pgo_slot_" + suffix_; }
  std::string publication() const { return "pgo_pub_" + suffix_; }

  // Runs `sql`; fails the test (and returns no rows) on an error.
  std::vector<std::vector<std::string>> exec(const std::string& sql) {
    return exec_params(sql, {});
  }

  std::vector<std::vector<std::string>> exec_params(const std::string& sql,
                                                    const std::vector<std::string>& params) {
    std::vector<const char*> values;
    for (const std::string& p : params) {
      values.push_back(p.c_str());
    }
    PGresult* result = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                                    values.data(), nullptr, nullptr, 0);
    std::vector<std::vector<std::string>> rows;
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(result);
    } else {
      for (int r = 0; r < PQntuples(result); ++r) {
        rows.emplace_back();
        for (int c = 0; c < PQnfields(result); ++c) {
          rows.back().emplace_back(PQgetvalue(result, r, c));
        }
      }
    }
    PQclear(result);
    return rows;
  }

  uint32_t oid_of(const std::string& regclass) {
    const auto rows = exec("SELECT '" + regclass + "'::regclass::oid");
    return rows.empty() ? 0 : static_cast<uint32_t>(std::stoul(rows[0][0]));
  }

  // Creates the publication for `tables` and a slot. Changes after this are captured.
  void start_capture(const std::string& tables) {
    exec("CREATE PUBLICATION " + publication() + " FOR TABLE " + tables);
    exec("SELECT pg_create_logical_replication_slot('" + slot() + "', 'pgoutput')");
    slot_created_ = true;
  }

  // Every message since start_capture, from pg_logical_slot_peek_binary_changes.
  std::vector<Captured> peek(int proto_version, const std::string& extra_options = "") {
    const std::string sql = "SELECT lsn, data FROM pg_logical_slot_peek_binary_changes('" + slot() +
                            "', NULL, NULL, 'proto_version', '" + std::to_string(proto_version) +
                            "', 'publication_names', '" + publication() + "'" + extra_options + ")";
    PGresult* result = PQexecParams(conn_, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr,
                                    /*resultFormat=*/1);
    std::vector<Captured> out;
    if (PQresultStatus(result) != PGRES_TUPLES_OK) {
      ADD_FAILURE() << sql << ": " << PQresultErrorMessage(result);
    } else {
      for (int r = 0; r < PQntuples(result); ++r) {
        Captured captured;
        const char* lsn = PQgetvalue(result, r, 0);
        EXPECT_EQ(PQgetlength(result, r, 0), 8);
        for (int i = 0; i < 8; ++i) {
          captured.lsn = (captured.lsn << 8) | static_cast<unsigned char>(lsn[i]);
        }
        captured.data.assign(PQgetvalue(result, r, 1), PQgetlength(result, r, 1));
        out.push_back(std::move(captured));
      }
    }
    PQclear(result);
    for (const Captured& c : out) {
      captured_.push_back(c.data);
    }
    return out;
  }

  // Decodes `captured` in order as one stream; fails the test at the first error. Leaves out a
  // Relation message that repeats the last one for its relation (xid aside): pgoutput resends
  // them after invalidations, which other sessions cause (creating a publication does), so they
  // come and go with what runs at the same time.
  DecodedList decode_all(const std::vector<Captured>& captured, int proto_version) {
    DecodedList out;
    PgOutputDecoder decoder(proto_version);
    std::map<uint32_t, std::string> relations;
    for (const Captured& c : captured) {
      auto d = std::make_unique<Decoded>();
      d->lsn = c.lsn;
      d->data = c.data;
      d->in_stream = decoder.in_stream();
      const auto checked = decoder.decode(d->data);
      EXPECT_TRUE(checked.ok()) << checked.status();
      if (!checked.ok()) {
        break;
      }
      auto message = decode_message(d->data, d->in_stream, d->scratch);
      EXPECT_TRUE(message.ok()) << message.status();
      if (!message.ok()) {
        break;
      }
      d->message = *message;
      EXPECT_EQ(describe(d->message), describe(*checked));
      std::string encoded;
      append_message(d->message, encoded);
      EXPECT_EQ(encoded, d->data) << "re-encoding " << describe(d->message);
      expect_views_inside(d->message, d->data);
      if (const auto* relation = std::get_if<Relation>(&d->message)) {
        std::string without_xid = d->data;
        if (d->in_stream) {
          without_xid.erase(1, 4);
        }
        std::string& last = relations[relation->oid];
        if (last == without_xid) {
          continue;
        }
        last = without_xid;
      }
      out.push_back(std::move(d));
    }
    EXPECT_FALSE(decoder.in_stream()) << "the capture ends inside a stream";
    return out;
  }

  // With WEIR_PGOUTPUT_SEED_DIR set, writes up to 3 captured messages per tag (each alone, and
  // the first also inside an XLogData frame) as fuzz seeds, and the first ones as a sequence
  // (sources/fuzz/pgoutput/pgoutput_fuzz.cc says how it reads them).
  void write_seeds() {
    const char* dir = std::getenv("WEIR_PGOUTPUT_SEED_DIR");
    if (dir == nullptr || captured_.empty()) {
      return;
    }
    std::filesystem::create_directories(dir);
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::map<char, int> per_tag;
    std::set<std::string> seen;
    int n = 0;
    auto write = [&](const std::string& name, const std::string& bytes) {
      std::ofstream(std::filesystem::path(dir) / name, std::ios::binary) << bytes;
    };
    for (const std::string& data : captured_) {
      if (data.empty() || data.size() > 2048 || !seen.insert(data).second ||
          ++per_tag[data[0]] > 3) {
        continue;
      }
      const std::string name = test + "-" + std::to_string(n++) + "-" + data[0];
      write(name, data);
      if (per_tag[data[0]] == 1) {
        std::string frame;
        append_xlog_data({.wal_start = 0x1000000, .wal_end = 0x1000100, .payload = data}, frame);
        write(name + "-xlogdata", frame);
      }
    }
    // A stream for pgoutput_fuzz's sequence mode: "\xffSEQ", then [Int16 length][message]...
    std::string sequence = "\xffSEQ";
    int in_sequence = 0;
    for (const std::string& data : captured_) {
      if (data.size() <= 2048 && in_sequence++ < 24) {
        sequence.push_back(static_cast<char>(data.size() >> 8));
        sequence.push_back(static_cast<char>(data.size() & 0xff));
        sequence += data;
      }
    }
    write(test + "-sequence", sequence);
    std::string keepalive;
    append_primary_keepalive({.wal_end = 0x1000100, .send_time = 1, .reply_requested = true},
                             keepalive);
    write("keepalive", keepalive);
  }

  PGconn* conn_ = nullptr;
  std::string suffix_;
  std::string schema_;
  bool slot_created_ = false;
  std::vector<std::string> captured_;
};

TEST_F(PostgresPgOutputTest, DecodesChangesUnderFullAndDefaultReplicaIdentity) {
  exec("CREATE TABLE full_t (id int PRIMARY KEY, name text, score numeric(10,2))");
  exec("ALTER TABLE full_t REPLICA IDENTITY FULL");
  exec("CREATE TABLE def_t (id int PRIMARY KEY, name text)");
  start_capture("full_t, def_t");
  exec("INSERT INTO full_t VALUES (1, 'one', 1.5), (2, NULL, NULL)");
  exec("UPDATE full_t SET name = 'uno' WHERE id = 1");
  exec("DELETE FROM full_t WHERE id = 2");
  exec("INSERT INTO def_t VALUES (1, 'a')");
  exec("UPDATE def_t SET name = 'b' WHERE id = 1");
  exec("UPDATE def_t SET id = 10 WHERE id = 1");
  exec("DELETE FROM def_t WHERE id = 10");
  const DecodedList decoded = decode_all(peek(1), 1);
  ASSERT_EQ(tags(decoded),
            "BRIIC"
            "BUC"
            "BDC"
            "BRIC"
            "BUC"
            "BUC"
            "BDC");

  const uint32_t full_oid = oid_of("full_t");
  const uint32_t def_oid = oid_of("def_t");
  const auto relations = all_of<Relation>(decoded);
  ASSERT_EQ(relations.size(), 2U);
  EXPECT_EQ(relations[0]->oid, full_oid);
  EXPECT_EQ(relations[0]->namespace_name, schema_);
  EXPECT_EQ(relations[0]->name, "full_t");
  EXPECT_EQ(relations[0]->replica_identity, ReplicaIdentity::kFull);
  EXPECT_THAT(column_names(*relations[0]), ElementsAre("id", "name", "score"));
  EXPECT_EQ(relations[0]->columns[0].type_oid, 23U);    // int4
  EXPECT_EQ(relations[0]->columns[1].type_oid, 25U);    // text
  EXPECT_EQ(relations[0]->columns[2].type_oid, 1700U);  // numeric
  EXPECT_EQ(relations[0]->columns[0].type_modifier, -1);
  EXPECT_EQ(relations[0]->columns[2].type_modifier, ((10 << 16) | 2) + 4);
  for (const RelationColumn& column : relations[0]->columns) {
    EXPECT_TRUE(column.is_key()) << column.name << ": every column is key under FULL";
  }
  EXPECT_EQ(relations[1]->oid, def_oid);
  EXPECT_EQ(relations[1]->replica_identity, ReplicaIdentity::kDefault);
  EXPECT_THAT(column_names(*relations[1]), ElementsAre("id", "name"));
  EXPECT_TRUE(relations[1]->columns[0].is_key());
  EXPECT_FALSE(relations[1]->columns[1].is_key());

  const auto inserts = all_of<Insert>(decoded);
  ASSERT_EQ(inserts.size(), 3U);
  EXPECT_EQ(inserts[0]->relation_oid, full_oid);
  EXPECT_FALSE(inserts[0]->xid.has_value());
  EXPECT_THAT(cells(inserts[0]->new_tuple), ElementsAre("1", "one", "1.50"));
  EXPECT_THAT(cells(inserts[1]->new_tuple), ElementsAre("2", "NULL", "NULL"));
  EXPECT_EQ(inserts[2]->relation_oid, def_oid);
  EXPECT_THAT(cells(inserts[2]->new_tuple), ElementsAre("1", "a"));

  const auto updates = all_of<Update>(decoded);
  ASSERT_EQ(updates.size(), 3U);
  EXPECT_EQ(updates[0]->relation_oid, full_oid);
  EXPECT_EQ(updates[0]->old_kind, OldTupleKind::kFull);
  EXPECT_THAT(cells(updates[0]->old_tuple), ElementsAre("1", "one", "1.50"));
  EXPECT_THAT(cells(updates[0]->new_tuple), ElementsAre("1", "uno", "1.50"));
  EXPECT_EQ(updates[1]->relation_oid, def_oid);
  EXPECT_EQ(updates[1]->old_kind, OldTupleKind::kNone);  // The key did not change.
  EXPECT_TRUE(updates[1]->old_tuple.empty());
  EXPECT_THAT(cells(updates[1]->new_tuple), ElementsAre("1", "b"));
  EXPECT_EQ(updates[2]->old_kind, OldTupleKind::kKey);
  EXPECT_THAT(cells(updates[2]->old_tuple), ElementsAre("1", "NULL"));
  EXPECT_THAT(cells(updates[2]->new_tuple), ElementsAre("10", "b"));

  const auto deletes = all_of<Delete>(decoded);
  ASSERT_EQ(deletes.size(), 2U);
  EXPECT_EQ(deletes[0]->relation_oid, full_oid);
  EXPECT_EQ(deletes[0]->old_kind, OldTupleKind::kFull);
  EXPECT_THAT(cells(deletes[0]->old_tuple), ElementsAre("2", "NULL", "NULL"));
  EXPECT_EQ(deletes[1]->relation_oid, def_oid);
  EXPECT_EQ(deletes[1]->old_kind, OldTupleKind::kKey);
  EXPECT_THAT(cells(deletes[1]->old_tuple), ElementsAre("10", "NULL"));

  // Each Begin matches its Commit; commit times are now-ish; LSNs increase.
  const auto begins = all_of<Begin>(decoded);
  const auto commits = all_of<Commit>(decoded);
  ASSERT_EQ(begins.size(), 7U);
  ASSERT_EQ(commits.size(), 7U);
  const PgTimestamp now = pg_timestamp_now();
  for (size_t i = 0; i < begins.size(); ++i) {
    EXPECT_EQ(begins[i]->final_lsn, commits[i]->commit_lsn);
    EXPECT_EQ(begins[i]->commit_time, commits[i]->commit_time);
    EXPECT_GT(commits[i]->end_lsn, commits[i]->commit_lsn);
    EXPECT_EQ(commits[i]->flags, 0);
    EXPECT_NE(begins[i]->xid, 0U);
    EXPECT_LT(std::abs(now - commits[i]->commit_time), 600'000'000) << "commit time";
    if (i > 0) {
      EXPECT_GT(begins[i]->xid, begins[i - 1]->xid);
      EXPECT_GE(commits[i]->commit_lsn, commits[i - 1]->end_lsn);
    }
  }
  // The peeked lsn of a Commit row is its commit LSN... and what PostgreSQL formats matches ours.
  const auto text = exec("SELECT '" + format_lsn(commits[0]->commit_lsn) + "'::pg_lsn::text");
  ASSERT_EQ(text.size(), 1U);
  EXPECT_EQ(text[0][0], format_lsn(commits[0]->commit_lsn));
  EXPECT_EQ(*parse_lsn(text[0][0]), commits[0]->commit_lsn);
}

std::string random_text(size_t size, uint64_t seed) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.;:!?-_";
  std::mt19937_64 rng(seed);
  std::string out(size, ' ');
  for (char& c : out) {
    c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  }
  return out;
}

TEST_F(PostgresPgOutputTest, SendsUnchangedToastAsUnchangedAndNullsAsNull) {
  exec("CREATE TABLE toast_t (id int PRIMARY KEY, big text, note text, n int)");
  exec("ALTER TABLE toast_t ALTER COLUMN big SET STORAGE EXTERNAL");
  start_capture("toast_t");
  const std::string big = random_text(12000, 1);
  exec_params("INSERT INTO toast_t VALUES (1, $1, NULL, NULL)", {big});
  exec("INSERT INTO toast_t VALUES (2, NULL, 'n', 7)");
  exec("UPDATE toast_t SET note = 'changed' WHERE id = 1");
  exec("UPDATE toast_t SET big = 'small now' WHERE id = 1");
  const DecodedList decoded = decode_all(peek(1), 1);
  ASSERT_EQ(tags(decoded),
            "BRIC"
            "BIC"
            "BUC"
            "BUC");
  const auto relations = all_of<Relation>(decoded);
  EXPECT_EQ(relations[0]->replica_identity, ReplicaIdentity::kDefault);
  const auto inserts = all_of<Insert>(decoded);
  ASSERT_EQ(inserts.size(), 2U);
  EXPECT_THAT(cells(inserts[0]->new_tuple), ElementsAre("1", big, "NULL", "NULL"));
  EXPECT_THAT(cells(inserts[1]->new_tuple), ElementsAre("2", "NULL", "n", "7"));
  const auto updates = all_of<Update>(decoded);
  ASSERT_EQ(updates.size(), 2U);
  EXPECT_EQ(updates[0]->old_kind, OldTupleKind::kNone);
  EXPECT_THAT(cells(updates[0]->new_tuple), ElementsAre("1", "<toast>", "changed", "NULL"));
  EXPECT_TRUE(updates[0]->new_tuple[1].is_unchanged_toast());
  EXPECT_THAT(cells(updates[1]->new_tuple), ElementsAre("1", "small now", "changed", "NULL"));
}

TEST_F(PostgresPgOutputTest, DecodesATruncateOfTwoTables) {
  exec("CREATE TABLE a (id serial PRIMARY KEY)");
  exec("CREATE TABLE b (id int)");
  exec("CREATE TABLE c (id int)");
  start_capture("a, b, c");
  exec("INSERT INTO a DEFAULT VALUES");
  exec("TRUNCATE a, b RESTART IDENTITY CASCADE");
  exec("TRUNCATE c");
  const DecodedList decoded = decode_all(peek(1), 1);
  // (TRUNCATE gives a and b new relfilenodes: a's Relation message comes again, left out.)
  ASSERT_EQ(tags(decoded),
            "BRIC"
            "BRTC"
            "BRTC");
  const auto truncates = all_of<Truncate>(decoded);
  ASSERT_EQ(truncates.size(), 2U);
  std::vector<uint32_t> oids(truncates[0]->relation_oids.begin(),
                             truncates[0]->relation_oids.end());
  std::sort(oids.begin(), oids.end());
  std::vector<uint32_t> expected = {oid_of("a"), oid_of("b")};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(oids, expected);
  EXPECT_TRUE(truncates[0]->cascade);
  EXPECT_TRUE(truncates[0]->restart_identity);
  EXPECT_THAT(
      std::vector<uint32_t>(truncates[1]->relation_oids.begin(), truncates[1]->relation_oids.end()),
      ElementsAre(oid_of("c")));
  EXPECT_FALSE(truncates[1]->cascade);
  EXPECT_FALSE(truncates[1]->restart_identity);
  const auto relations = all_of<Relation>(decoded);
  ASSERT_EQ(relations.size(), 3U);
  EXPECT_EQ(relations[0]->name, "a");
  EXPECT_EQ(relations[1]->name, "b");
  EXPECT_EQ(relations[2]->name, "c");
}

TEST_F(PostgresPgOutputTest, DecodesLogicalMessages) {
  exec("CREATE TABLE t (id int PRIMARY KEY)");
  start_capture("t");
  const std::string prefix = "weir_" + suffix_;
  const auto emitted = exec("SELECT pg_logical_emit_message(true, '" + prefix + "', 'content')");
  exec("SELECT pg_logical_emit_message(false, '" + prefix + "', '\\x6f7468657201'::bytea)");
  exec("INSERT INTO t VALUES (1)");
  const DecodedList without = decode_all(peek(1), 1);
  EXPECT_EQ(tags(without), "BRIC");  // Messages only with the 'messages' option.
  const DecodedList decoded =
      without_foreign(decode_all(peek(1, ", 'messages', 'true'"), 1), std::nullopt, prefix);
  ASSERT_EQ(tags(decoded),
            "BMC"
            "M"
            "BRIC");
  const auto messages = all_of<LogicalMessage>(decoded);
  ASSERT_EQ(messages.size(), 2U);
  EXPECT_TRUE(messages[0]->transactional);
  EXPECT_EQ(messages[0]->prefix, prefix);
  EXPECT_EQ(messages[0]->content, "content");
  ASSERT_EQ(emitted.size(), 1U);
  EXPECT_EQ(format_lsn(messages[0]->lsn), emitted[0][0]);
  EXPECT_FALSE(messages[1]->transactional);
  EXPECT_EQ(messages[1]->content, std::string_view("other\x01", 6));
  EXPECT_THAT(describe(decoded[3]->message), HasSubstr("content='other\\x01'"));
}

// A transaction replayed through a replication origin (as a subscriber applies one) carries an
// Origin message after its Begin.
TEST_F(PostgresPgOutputTest, DecodesAnOriginMessage) {
  exec("CREATE TABLE t (id int PRIMARY KEY)");
  start_capture("t");
  const std::string origin = "weir_origin_" + suffix_;
  exec("SELECT pg_replication_origin_create('" + origin + "')");
  exec("SELECT pg_replication_origin_session_setup('" + origin + "')");
  exec("BEGIN");
  exec("SELECT pg_replication_origin_xact_setup('5/ABCDEF', now())");
  exec("INSERT INTO t VALUES (1)");
  exec("COMMIT");
  exec("SELECT pg_replication_origin_session_reset()");
  exec("SELECT pg_replication_origin_drop('" + origin + "')");
  const DecodedList decoded = decode_all(peek(1), 1);
  ASSERT_EQ(tags(decoded), "BORIC");
  const Origin& m = *all_of<Origin>(decoded)[0];
  EXPECT_EQ(m.name, origin);
  EXPECT_EQ(m.commit_lsn, *parse_lsn("5/ABCDEF"));
  EXPECT_EQ(relation_oid(decoded[2]->message), oid_of("t"));
  EXPECT_EQ(relation_oid(decoded[1]->message), std::nullopt);
}

TEST_F(PostgresPgOutputTest, SendsATypeMessageForAnEnum) {
  exec("CREATE TYPE mood AS ENUM ('sad', 'happy')");
  exec("CREATE TABLE person (name text, current mood, history mood[])");
  exec("ALTER TABLE person REPLICA IDENTITY FULL");
  start_capture("person");
  exec("INSERT INTO person VALUES ('ann', 'happy', '{sad,happy}')");
  const DecodedList decoded = decode_all(peek(1), 1);
  const uint32_t mood = std::stoul(exec("SELECT 'mood'::regtype::oid")[0][0]);
  const uint32_t mood_array = std::stoul(exec("SELECT '_mood'::regtype::oid")[0][0]);
  ASSERT_EQ(tags(decoded), "BYYRIC");
  const auto types = all_of<Type>(decoded);
  EXPECT_EQ(types[0]->oid, mood);
  EXPECT_EQ(types[0]->namespace_name, schema_);
  EXPECT_EQ(types[0]->name, "mood");
  EXPECT_EQ(types[1]->oid, mood_array);
  EXPECT_EQ(types[1]->name, "_mood");
  const Relation& relation = *all_of<Relation>(decoded)[0];
  EXPECT_EQ(relation.columns[1].type_oid, mood);
  EXPECT_EQ(relation.columns[2].type_oid, mood_array);
  EXPECT_THAT(cells(all_of<Insert>(decoded)[0]->new_tuple),
              ElementsAre("ann", "happy", "{sad,happy}"));
}

TEST_F(PostgresPgOutputTest, DecodesATransactionSpanningThreeTables) {
  exec("CREATE TABLE x (id int PRIMARY KEY, v text)");
  exec("CREATE TABLE y (id int PRIMARY KEY, v text)");
  exec("CREATE TABLE z (id int PRIMARY KEY, v text)");
  start_capture("x, y, z");
  exec("BEGIN");
  exec("INSERT INTO x VALUES (1, 'x1')");
  exec("INSERT INTO y VALUES (2, 'y2')");
  exec("UPDATE x SET v = 'x1b' WHERE id = 1");
  exec("INSERT INTO z VALUES (3, 'z3')");
  exec("COMMIT");
  const DecodedList decoded = decode_all(peek(1), 1);
  ASSERT_EQ(tags(decoded), "BRIRIURIC");
  const auto relations = all_of<Relation>(decoded);
  EXPECT_EQ(relations[0]->name, "x");
  EXPECT_EQ(relations[1]->name, "y");
  EXPECT_EQ(relations[2]->name, "z");
  const auto inserts = all_of<Insert>(decoded);
  EXPECT_EQ(inserts[0]->relation_oid, oid_of("x"));
  EXPECT_EQ(inserts[1]->relation_oid, oid_of("y"));
  EXPECT_EQ(inserts[2]->relation_oid, oid_of("z"));
  EXPECT_THAT(cells(inserts[2]->new_tuple), ElementsAre("3", "z3"));
  EXPECT_THAT(cells(all_of<Update>(decoded)[0]->new_tuple), ElementsAre("1", "x1b"));
  EXPECT_EQ(all_of<Begin>(decoded)[0]->final_lsn, all_of<Commit>(decoded)[0]->commit_lsn);
}

// A transaction larger than logical_decoding_work_mem (64kB, set in the session that decodes),
// streamed under protocol 2: Stream Start/Stop blocks whose changes carry the xid, then Stream
// Commit (or, rolled back, Stream Abort).
class PostgresPgOutputStreamingTest : public PostgresPgOutputTest {
 protected:
  static constexpr int kRows = 3000;

  void create_tables() {
    exec("CREATE TABLE big (id int PRIMARY KEY, pad text)");
    exec("CREATE TABLE small (id int PRIMARY KEY)");
    start_capture("big, small");
  }

  void insert_big(int from, int to) {
    exec("INSERT INTO big SELECT g, repeat(md5(g::text), 4) FROM generate_series(" +
         std::to_string(from) + ", " + std::to_string(to) + ") g");
  }

  // The current transaction's xid (assigning one).
  Xid current_xid() {
    const auto rows = exec("SELECT txid_current() % 4294967296");
    return rows.empty() ? 0 : static_cast<Xid>(std::stoul(rows[0][0]));
  }

  // Streamed, this test's blocks, without other tests' streams.
  DecodedList peek_streamed() {
    return without_foreign(decode_all(peek(2, ", 'streaming', 'on'"), 2), xid_);
  }

  // Ends with a small transaction of its own, after `end`; streams once decoded.
  void big_transaction(const std::string& end) {
    create_tables();
    exec("BEGIN");
    xid_ = current_xid();
    insert_big(1, kRows);
    exec(end);
    exec("INSERT INTO small VALUES (1)");
    exec("SET logical_decoding_work_mem = '64kB'");
  }

  Xid xid_ = 0;  // Of the big transaction.

  struct Blocks {
    Xid xid = 0;              // Of the streamed transaction.
    std::map<Xid, int> rows;  // Inserts inside the blocks, by the xid they carry.
  };

  // Checks the stream blocks of `decoded`: one transaction, rows of big in id order.
  Blocks check_stream_blocks(const DecodedList& decoded) {
    Blocks out;
    const auto starts = all_of<StreamStart>(decoded);
    EXPECT_FALSE(starts.empty()) << tags(decoded).substr(0, 50);
    if (starts.empty()) {
      return out;
    }
    out.xid = starts[0]->xid;
    EXPECT_EQ(out.xid, xid_);
    EXPECT_TRUE(starts[0]->first_segment);
    for (size_t i = 1; i < starts.size(); ++i) {
      EXPECT_EQ(starts[i]->xid, out.xid);
      EXPECT_FALSE(starts[i]->first_segment);
    }
    EXPECT_EQ(all_of<StreamStop>(decoded).size(), starts.size());
    int last_id = 0;
    std::set<Xid> relation_xids;
    for (const auto& d : decoded) {
      if (const auto* insert = std::get_if<Insert>(&d->message); insert && d->in_stream) {
        EXPECT_TRUE(insert->xid.has_value());
        ++out.rows[insert->xid.value_or(0)];
        const auto row = cells(insert->new_tuple);
        EXPECT_EQ(row.size(), 2U);
        EXPECT_GT(std::stoi(row[0]), last_id) << "rows out of order";
        last_id = std::stoi(row[0]);
      }
      if (const auto* relation = std::get_if<Relation>(&d->message); relation && d->in_stream) {
        EXPECT_TRUE(relation->xid.has_value());
        relation_xids.insert(relation->xid.value_or(0));
        EXPECT_EQ(relation->name, "big");
      }
    }
    // A Relation inside a block carries the xid of the (sub)transaction whose change needs it.
    for (Xid xid : relation_xids) {
      EXPECT_TRUE(xid == out.xid || out.rows.count(xid) == 1) << xid;
    }
    return out;
  }
};

TEST_F(PostgresPgOutputStreamingTest, DecodesAStreamedTransactionThatCommits) {
  big_transaction("COMMIT");
  const DecodedList decoded = peek_streamed();
  const std::string sequence = tags(decoded);
  ASSERT_EQ(sequence.substr(0, 2), "SR") << sequence.substr(0, 50);
  ASSERT_EQ(sequence.substr(sequence.size() - 5), "cBRIC") << sequence.substr(sequence.size() - 50);
  const Blocks blocks = check_stream_blocks(decoded);
  EXPECT_GE(all_of<StreamStart>(decoded).size(), 2U) << "expected several blocks";
  EXPECT_EQ(blocks.rows, (std::map<Xid, int>{{blocks.xid, kRows}}));
  const auto commits = all_of<StreamCommit>(decoded);
  ASSERT_EQ(commits.size(), 1U);
  EXPECT_EQ(commits[0]->xid, blocks.xid);
  EXPECT_GT(commits[0]->end_lsn, commits[0]->commit_lsn);
  EXPECT_GT(all_of<Begin>(decoded)[0]->xid, blocks.xid);
  // Under protocol 1 the same transaction arrives whole.
  const DecodedList whole = decode_all(peek(1), 1);
  EXPECT_EQ(tags(whole), "BR" + std::string(kRows, 'I') + "C" + "BRIC");
}

// Decoded after the fact, a rolled-back transaction is a concurrent abort to the walsender: it
// stops streaming at the first catalog access, so its one block is empty, then Stream Abort.
TEST_F(PostgresPgOutputStreamingTest, DecodesAStreamedTransactionThatRollsBack) {
  big_transaction("ROLLBACK");
  const DecodedList decoded = peek_streamed();
  const std::string sequence = tags(decoded);
  ASSERT_EQ(sequence.substr(sequence.size() - 5), "ABRIC") << sequence.substr(sequence.size() - 50);
  const Blocks blocks = check_stream_blocks(decoded);
  const auto aborts = all_of<StreamAbort>(decoded);
  ASSERT_EQ(aborts.size(), 1U);
  EXPECT_EQ(aborts[0]->xid, blocks.xid);
  EXPECT_EQ(aborts[0]->subxid, blocks.xid);  // The whole transaction.
  EXPECT_TRUE(all_of<StreamCommit>(decoded).empty());
}

// ROLLBACK TO SAVEPOINT after the subtransaction's rows were streamed: Stream Abort names the
// subtransaction, whose rows carried its own xid; the savepoint's next subtransaction inserts 10
// rows, and the transaction commits.
TEST_F(PostgresPgOutputStreamingTest, DecodesAStreamedSubtransactionThatRollsBack) {
  create_tables();
  exec("BEGIN");
  xid_ = current_xid();
  insert_big(1, kRows);
  exec("SAVEPOINT s");
  insert_big(kRows + 1, 2 * kRows);
  exec("ROLLBACK TO SAVEPOINT s");
  insert_big(2 * kRows + 1, 2 * kRows + 10);
  exec("COMMIT");
  exec("SET logical_decoding_work_mem = '64kB'");
  const DecodedList decoded = peek_streamed();
  const Blocks blocks = check_stream_blocks(decoded);
  const auto aborts = all_of<StreamAbort>(decoded);
  ASSERT_EQ(aborts.size(), 1U) << tags(decoded).substr(0, 80);
  EXPECT_EQ(aborts[0]->xid, blocks.xid);
  const Xid sub = aborts[0]->subxid;
  EXPECT_NE(sub, blocks.xid);
  ASSERT_EQ(blocks.rows.size(), 3U);
  EXPECT_EQ(blocks.rows.count(blocks.xid) ? blocks.rows.at(blocks.xid) : 0, kRows);
  EXPECT_GT(blocks.rows.count(sub) ? blocks.rows.at(sub) : 0, 0);
  EXPECT_LE(blocks.rows.count(sub) ? blocks.rows.at(sub) : 0, kRows);
  EXPECT_EQ(blocks.rows.rbegin()->second, 10);  // The next subtransaction: the largest xid.
  EXPECT_GT(blocks.rows.rbegin()->first, sub);
  const auto commits = all_of<StreamCommit>(decoded);
  ASSERT_EQ(commits.size(), 1U);
  EXPECT_EQ(commits[0]->xid, blocks.xid);
}

// Captures one of everything (both protocol versions) for the robustness tests.
class PostgresPgOutputCorpusTest : public PostgresPgOutputTest {
 protected:
  struct Sample {
    std::string data;
    bool in_stream = false;
    int proto_version = 1;
  };

  std::vector<Sample> capture_corpus() {
    exec("CREATE TYPE color AS ENUM ('red', 'green')");
    exec("CREATE TABLE k (id int PRIMARY KEY, c color, t text, big text)");
    exec("CREATE TABLE f (id int, t text)");
    exec("ALTER TABLE f REPLICA IDENTITY FULL");
    exec("ALTER TABLE k ALTER COLUMN big SET STORAGE EXTERNAL");
    start_capture("k, f");
    exec_params("INSERT INTO k VALUES (1, 'red', NULL, $1)", {random_text(9000, 2)});
    exec("UPDATE k SET t = 'x' WHERE id = 1");
    exec("UPDATE k SET id = 2 WHERE id = 1");
    exec("DELETE FROM k");
    exec("INSERT INTO f VALUES (1, 'a'), (2, NULL)");
    exec("UPDATE f SET t = 'b'");
    exec("DELETE FROM f WHERE id = 2");
    exec("TRUNCATE k, f");
    exec("SELECT pg_logical_emit_message(true, 'pfx', 'transactional')");
    exec("SELECT pg_logical_emit_message(false, 'pfx', 'not')");
    exec("BEGIN");
    exec("INSERT INTO f SELECT g, repeat('p', 100) FROM generate_series(1, 1000) g");
    exec("UPDATE f SET t = 'q' WHERE id < 3");
    exec("TRUNCATE k");
    exec("SELECT pg_logical_emit_message(true, 'pfx', 'in stream')");
    exec("COMMIT");
    exec("SET logical_decoding_work_mem = '64kB'");
    std::vector<Sample> out;
    for (int proto : {1, 2}) {
      const std::string options =
          proto == 1 ? ", 'messages', 'true'" : ", 'messages', 'true', 'streaming', 'on'";
      const DecodedList decoded = decode_all(peek(proto, options), proto);
      std::map<std::pair<char, bool>, int> seen;
      for (const auto& d : decoded) {
        // Every kind of message, and a few of the 1000 inserts.
        if (++seen[{message_tag(d->message), d->in_stream}] <= 5) {
          out.push_back({d->data, d->in_stream, proto});
        }
      }
    }
    std::string kinds;
    for (const Sample& s : out) {
      kinds += s.data[0];
    }
    for (char tag : std::string("BCRYIUDTMSEc")) {
      EXPECT_NE(kinds.find(tag), std::string::npos) << "no " << tag << " captured";
    }
    return out;
  }
};

TEST_F(PostgresPgOutputCorpusTest, EveryTruncationOfACapturedMessageIsAnError) {
  const auto corpus = capture_corpus();
  DecodeScratch scratch;
  for (const Sample& sample : corpus) {
    ASSERT_TRUE(decode_message(sample.data, sample.in_stream, scratch).ok());
    for (size_t n = 0; n < sample.data.size(); ++n) {
      const std::string prefix =
          sample.data.substr(0, n);  // Its own allocation: ASan sees past it.
      const auto message = decode_message(prefix, sample.in_stream, scratch);
      ASSERT_FALSE(message.ok()) << "a prefix of " << n << " bytes decoded as "
                                 << describe(*message);
      EXPECT_EQ(message.status().code(), absl::StatusCode::kInvalidArgument);
      const char tag = sample.data[0];
      const size_t oid_end = 1 + (sample.in_stream ? 4 : 0) + 4;
      if ((tag == 'I' || tag == 'U' || tag == 'D' || tag == 'R') && n >= oid_end) {
        EXPECT_THAT(std::string(message.status().message()), HasSubstr("for relation "))
            << "a prefix of " << n << " bytes of "
            << describe(*decode_message(sample.data, sample.in_stream, scratch));
      }
    }
  }
}

TEST_F(PostgresPgOutputCorpusTest, RandomByteFlipsNeverReadOutsideTheMessage) {
  const auto corpus = capture_corpus();
  std::mt19937_64 rng(11);
  DecodeScratch scratch;
  int decoded = 0;
  int refused = 0;
  for (const Sample& sample : corpus) {
    for (int round = 0; round < 300; ++round) {
      std::string mutated = sample.data;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < flips; ++i) {
        mutated[rng() % mutated.size()] = static_cast<char>(rng() & 0xff);
      }
      if (rng() % 4 == 0) {
        mutated.resize(rng() % (mutated.size() + 4), static_cast<char>(rng() & 0xff));
      }
      for (bool in_stream : {false, true}) {
        const auto message = decode_message(mutated, in_stream, scratch);
        if (message.ok()) {
          ++decoded;
          expect_views_inside(*message, mutated);
          std::string encoded;
          append_message(*message, encoded);
          ASSERT_EQ(encoded, mutated) << "decoding is exact: " << describe(*message);
        } else {
          ++refused;
          EXPECT_FALSE(message.status().message().empty());
        }
      }
    }
  }
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
}

// Decoding captured inserts in a loop: no allocation once the scratch has grown (its buffer
// stays put), and a rough rate for the record.
TEST_F(PostgresPgOutputTest, DecodesCapturedInsertsWithoutAllocating) {
  exec("CREATE TABLE r (id bigint PRIMARY KEY, name text, score float8, at timestamptz, ok bool)");
  start_capture("r");
  exec(
      "INSERT INTO r SELECT g, 'name ' || g, g / 7.0, now(), g % 2 = 0 "
      "FROM generate_series(1, 20000) g");
  const std::vector<Captured> captured = peek(1);
  std::vector<std::string> inserts;
  for (const Captured& c : captured) {
    if (!c.data.empty() && c.data[0] == 'I') {
      inserts.push_back(c.data);
    }
  }
  ASSERT_EQ(inserts.size(), 20000U);
  PgOutputDecoder decoder;
  ASSERT_TRUE(decoder.decode(inserts[0]).ok());
  const TupleColumn* buffer = std::get<Insert>(*decoder.decode(inserts[0])).new_tuple.data();
  size_t messages = 0;
  size_t bytes = 0;
  uint64_t check = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = std::chrono::steady_clock::duration::zero();
  while (elapsed < std::chrono::milliseconds(300)) {
    for (const std::string& insert : inserts) {
      const auto message = decoder.decode(insert);
      if (!message.ok()) {
        FAIL() << message.status();
      }
      const Insert& m = std::get<Insert>(*message);
      check += m.new_tuple.size() + m.new_tuple[1].value.size();
      if (m.new_tuple.data() != buffer) {
        FAIL() << "the scratch was reallocated";
      }
      bytes += insert.size();
    }
    messages += inserts.size();
    elapsed = std::chrono::steady_clock::now() - start;
  }
  const double seconds = std::chrono::duration<double>(elapsed).count();
  std::printf("decoded %zu captured inserts in %.3f s: %.2f M messages/s, %.0f MB/s\n", messages,
              seconds, messages / seconds / 1e6, bytes / seconds / 1e6);
  EXPECT_GT(check, 0U);
  // The last row, as inserted.
  const auto last = decoder.decode(inserts.back());
  ASSERT_TRUE(last.ok());
  const auto row = cells(std::get<Insert>(*last).new_tuple);
  ASSERT_EQ(row.size(), 5U);
  EXPECT_EQ(row[0], "20000");
  EXPECT_EQ(row[1], "name 20000");
  EXPECT_EQ(row[4], "t");
}

}  // namespace
}  // namespace weir::sources::postgres
