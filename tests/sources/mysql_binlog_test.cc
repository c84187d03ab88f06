// Tests of the binlog decoder (weir/sources/mysql/binlog.h): hand-built events (every truncation,
// checksum flips, each column type's encoding) and, in the Mariadb tests, the binlog of a real
// MariaDB 10.11 read through a GTID dump (mysql/binlog_dump.h).
//
// WEIR_BINLOG_SEED_DIR=dir makes the Mariadb tests write every event they read to dir (one file
// each): the seeds of sources/fuzz/binlog.

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../support/mariadb/mariadb_conn.h"
#include "absl/strings/escaping.h"
#include "mysql/binlog_dump.h"
#include "mysql/catalog.h"
#include "mysql/connection.h"
#include <gtest/gtest.h>
#include <mariadb_rpl.h>

#include "weir/sources/mysql/binlog.h"
#include "weir/sources/mysql/types.h"

namespace weir::sources::mysql {
namespace {

// Decoded events view their packet's bytes, as in the binlog reader, which keeps each packet
// until it is done with its event: the packets of a test live until the test binary ends.
std::string_view keep(std::string packet) {
  static std::deque<std::string> packets;
  return packets.emplace_back(std::move(packet));
}

using postgres::ColumnType;
using postgres::RelationDesc;
using postgres::RowEncoder;
using postgres::TextField;

// ---------------------------------------------------------------------------------------------
// Building events

const std::string kZero(1, '\0');

std::string le(uint64_t value, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(static_cast<char>(value >> (8 * i) & 0xff));
  }
  return out;
}

std::string be(uint64_t value, size_t n) {
  std::string out;
  for (size_t i = n; i-- > 0;) {
    out.push_back(static_cast<char>(value >> (8 * i) & 0xff));
  }
  return out;
}

std::string event(uint8_t type, std::string_view body, bool checksum = true) {
  const size_t size = kEventHeaderSize + body.size() + (checksum ? 4 : 0);
  std::string out = le(1700000000, 4) + std::string(1, static_cast<char>(type)) + le(1, 4) +
                    le(size, 4) + le(1234, 4) + le(0, 2);
  out += body;
  if (checksum) {
    out += le(crc32(out), 4);
  }
  return out;
}

// MariaDB 10.11's post-header lengths (types 1 to 164 and a few more).
std::string post_header_lengths() {
  std::string lengths(170, '\0');
  lengths[1] = 13;  // QUERY
  lengths[3] = 8;   // ROTATE
  lengths[18] = 8;  // TABLE_MAP
  lengths[22] = 8;  // WRITE_ROWS_V1
  lengths[23] = 8;
  lengths[24] = 8;
  lengths[29] = 10;  // WRITE_ROWS (v2)
  lengths[30] = 10;
  lengths[31] = 10;
  lengths[160] = 4;   // BINLOG_CHECKPOINT
  lengths[161] = 19;  // GTID
  lengths[162] = 4;   // GTID_LIST
  return lengths;
}

std::string format_description_body(ChecksumAlg alg) {
  std::string version = "10.11.19-MariaDB-log";
  version.resize(50, '\0');
  return le(4, 2) + version + le(0, 4) + std::string(1, 19) + post_header_lengths() +
         std::string(1, static_cast<char>(alg));
}

// A FORMAT_DESCRIPTION always has its 4 checksum bytes (zero when OFF).
std::string format_description(ChecksumAlg alg) {
  std::string body = format_description_body(alg);
  if (alg == ChecksumAlg::kCrc32) {
    return event(15, body, true);
  }
  std::string out = event(15, body + le(0, 4), false);
  return out;
}

std::string table_map_body(uint64_t table_id, std::string_view types, std::string_view metadata,
                           std::string_view nulls) {
  std::string out = le(table_id, 6) + le(1, 2);
  out += std::string(1, 4) + "weir" + std::string(1, '\0');
  out += std::string(1, 1) + "t" + std::string(1, '\0');
  out += std::string(1, static_cast<char>(types.size()));
  out += types;
  out += std::string(1, static_cast<char>(metadata.size()));
  out += metadata;
  out += nulls;
  return out;
}

std::string rows_body(uint64_t table_id, size_t columns, std::string_view rows,
                      bool update = false) {
  std::string bitmap((columns + 7) / 8, '\xff');
  std::string out =
      le(table_id, 6) + le(1, 2) + std::string(1, static_cast<char>(columns)) + bitmap;
  if (update) {
    out += bitmap;
  }
  return out + std::string(rows);
}

// A decoder that has seen a CRC32 FORMAT_DESCRIPTION.
BinlogDecoder crc_decoder() {
  BinlogDecoder decoder(ChecksumAlg::kCrc32);
  auto fd = decoder.decode(keep(format_description(ChecksumAlg::kCrc32)));
  EXPECT_TRUE(fd.ok()) << fd.status();
  return decoder;
}

MysqlColumn column(std::string data_type, std::string charset = "", bool is_unsigned = false) {
  MysqlColumn c;
  c.name = "c";
  c.data_type = std::move(data_type);
  c.charset = std::move(charset);
  c.is_unsigned = is_unsigned;
  return c;
}

// Decodes one non-NULL value of a one-column table: the binlog type, its metadata bytes, the
// value's bytes. Returns the canonical text or the error.
absl::StatusOr<std::string> decode_value(FieldType type, std::string_view metadata,
                                         const MysqlColumn& c, std::string_view value) {
  BinlogDecoder decoder = crc_decoder();
  const std::string types(1, static_cast<char>(type));
  auto map = decoder.decode(keep(event(19, table_map_body(7, types, metadata, "\x01"))));
  if (!map.ok()) {
    return map.status();
  }
  auto rows =
      decoder.decode(keep(event(23, rows_body(7, 1, std::string(1, '\0') + std::string(value)))));
  if (!rows.ok()) {
    return rows.status();
  }
  RowDecoder row_decoder;
  std::string text;
  int count = 0;
  const MysqlColumn columns[] = {c};
  absl::Status status = row_decoder.decode(
      std::get<TableMapEvent>(map->body), std::get<RowsEvent>(rows->body), columns,
      [&](std::span<const TextField> before, std::span<const TextField> after) {
        EXPECT_TRUE(before.empty());
        EXPECT_EQ(after.size(), 1u);
        EXPECT_FALSE(after[0].is_null);
        text = std::string(after[0].text);
        ++count;
        return absl::OkStatus();
      });
  // The same value straight into the row encoding: the bytes RowEncoder makes of its text, or
  // an error where the text is refused (the encoder's fast paths are checked against the text).
  auto weir = weir_column(c);
  std::string encoded;
  absl::Status direct = absl::OkStatus();
  if (weir.ok()) {
    const ColumnType column_types[] = {weir->type};
    direct = row_decoder.encode(std::get<TableMapEvent>(map->body), std::get<RowsEvent>(rows->body),
                                columns, column_types,
                                [&](std::string_view before, std::string_view after) {
                                  EXPECT_TRUE(before.empty());
                                  encoded = std::string(after);
                                  return absl::OkStatus();
                                });
  }
  if (!status.ok()) {
    if (weir.ok()) {
      EXPECT_FALSE(direct.ok()) << "encode() took what decode() refuses: " << status;
      EXPECT_EQ(direct.code(), status.code()) << direct << " vs " << status;
    }
    return status;
  }
  EXPECT_EQ(count, 1);
  if (weir.ok()) {
    RelationDesc desc;
    desc.columns.push_back(*weir);
    RowEncoder encoder(desc);
    std::string expected;
    const TextField field{text, false};
    absl::Status from_text = encoder.encode(std::span<const TextField>(&field, 1), expected);
    EXPECT_EQ(direct.ok(), from_text.ok())
        << "text " << text << ": " << direct << " vs " << from_text;
    if (direct.ok() && from_text.ok()) {
      EXPECT_EQ(absl::BytesToHexString(encoded), absl::BytesToHexString(expected))
          << "the encoding of " << text;
    }
  }
  return text;
}

std::string ok_value(FieldType type, std::string_view metadata, const MysqlColumn& c,
                     std::string_view value) {
  auto text = decode_value(type, metadata, c, value);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "<error>";
}

// ---------------------------------------------------------------------------------------------
// Events

TEST(BinlogEventTest, DecodesTheHeaderAndFormatDescription) {
  BinlogDecoder decoder(ChecksumAlg::kOff);
  auto fd = decoder.decode(keep(format_description(ChecksumAlg::kCrc32)));
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(fd->header.type, 15);
  EXPECT_EQ(fd->header.timestamp, 1700000000u);
  EXPECT_EQ(fd->header.server_id, 1u);
  EXPECT_EQ(fd->header.log_pos, 1234u);
  const auto& body = std::get<FormatDescriptionEvent>(fd->body);
  EXPECT_EQ(body.binlog_version, 4);
  EXPECT_EQ(body.server_version, "10.11.19-MariaDB-log");
  EXPECT_EQ(body.header_length, 19);
  EXPECT_EQ(body.checksum, ChecksumAlg::kCrc32);
  EXPECT_EQ(body.post_header_length(19), 8);
  EXPECT_EQ(body.post_header_length(162), 19);
  EXPECT_EQ(decoder.checksum(), ChecksumAlg::kCrc32);

  // An OFF description turns checking off for what follows.
  ASSERT_TRUE(decoder.decode(keep(format_description(ChecksumAlg::kOff))).ok());
  EXPECT_EQ(decoder.checksum(), ChecksumAlg::kOff);
  auto xid = decoder.decode(keep(event(16, le(99, 8), false)));
  ASSERT_TRUE(xid.ok()) << xid.status();
  EXPECT_EQ(std::get<XidEvent>(xid->body).xid, 99u);
}

TEST(BinlogEventTest, Crc32IsZlibs) {
  EXPECT_EQ(crc32("123456789"), 0xcbf43926u);
  EXPECT_EQ(crc32(""), 0u);
  // It continues from `crc`, over nothing too (libdeflate answers its initial value for a null
  // buffer, as an empty view's data may be).
  EXPECT_EQ(crc32("56789", crc32("1234")), 0xcbf43926u);
  EXPECT_EQ(crc32(std::string_view(), 0xcbf43926u), 0xcbf43926u);
  EXPECT_EQ(crc32("", 0xcbf43926u), 0xcbf43926u);
}

TEST(BinlogEventTest, EveryFlippedBitIsAnError) {
  const std::string events[] = {format_description(ChecksumAlg::kCrc32), event(16, le(99, 8)),
                                event(162, le(5, 8) + le(0, 4) + std::string(1, 1) + le(0, 6))};
  for (const std::string& good : events) {
    for (size_t i = 0; i < good.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string bad = good;
        bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
        BinlogDecoder decoder(ChecksumAlg::kCrc32);
        auto decoded = decoder.decode(keep(bad));
        // A FORMAT_DESCRIPTION whose algorithm byte flips to OFF is not checked: allowed.
        if (good[4] == 15 && i == good.size() - 5 && bad[i] == 0) {
          continue;
        }
        EXPECT_FALSE(decoded.ok()) << "byte " << i << " bit " << bit;
      }
    }
  }
  BinlogDecoder decoder(ChecksumAlg::kCrc32);
  std::string bad = event(16, le(99, 8));
  bad[20] ^= 1;
  auto decoded = decoder.decode(keep(bad));
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("XID event: checksum mismatch"), std::string::npos)
      << decoded.status();
}

TEST(BinlogEventTest, DecodesMariadbGtidEvents) {
  BinlogDecoder decoder = crc_decoder();
  auto gtid = decoder.decode(keep(event(162, le(42, 8) + le(3, 4) + std::string(1, 1) + le(0, 6))));
  ASSERT_TRUE(gtid.ok()) << gtid.status();
  const auto& g = std::get<GtidEvent>(gtid->body);
  EXPECT_EQ(g.seq_no, 42u);
  EXPECT_EQ(g.domain_id, 3u);
  EXPECT_TRUE(g.is_standalone());
  EXPECT_EQ(g.commit_id, 0u);

  auto grouped =
      decoder.decode(keep(event(162, le(43, 8) + le(0, 4) + std::string(1, 2) + le(777, 8))));
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  EXPECT_FALSE(std::get<GtidEvent>(grouped->body).is_standalone());
  EXPECT_EQ(std::get<GtidEvent>(grouped->body).commit_id, 777u);

  auto list = decoder.decode(keep(
      event(163, le(2, 4) + le(0, 4) + le(1, 4) + le(10, 8) + le(1, 4) + le(2, 4) + le(20, 8))));
  ASSERT_TRUE(list.ok()) << list.status();
  const auto& l = std::get<GtidListEvent>(list->body);
  ASSERT_EQ(l.gtids.size(), 2u);
  EXPECT_EQ(format_gtid(l.gtids[0]), "0-1-10");
  EXPECT_EQ(format_gtid(l.gtids[1]), "1-2-20");

  // A count that promises more than the event holds allocates nothing.
  auto huge = decoder.decode(keep(event(163, le(0x0fffffff, 4))));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("GTID_LIST"), std::string::npos) << huge.status();
}

TEST(BinlogEventTest, DecodesRotateCheckpointQueryHeartbeatAndUnknown) {
  BinlogDecoder decoder = crc_decoder();
  auto rotate = decoder.decode(keep(event(4, le(4, 8) + "mariadb-bin.000002")));
  ASSERT_TRUE(rotate.ok()) << rotate.status();
  EXPECT_EQ(std::get<RotateEvent>(rotate->body).next_file, "mariadb-bin.000002");
  EXPECT_EQ(std::get<RotateEvent>(rotate->body).position, 4u);

  auto checkpoint = decoder.decode(keep(event(161, le(3, 4) + "abc")));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(std::get<BinlogCheckpointEvent>(checkpoint->body).file, "abc");

  const std::string status_vars("\x00\x01\x02\x03\x04\x05", 6);
  auto query = decoder.decode(
      keep(event(2, le(11, 4) + le(2, 4) + std::string(1, 4) + le(0, 2) + le(6, 2) + status_vars +
                        "weir" + std::string(1, '\0') + "CREATE TABLE t (a int)")));
  ASSERT_TRUE(query.ok()) << query.status();
  const auto& q = std::get<QueryEvent>(query->body);
  EXPECT_EQ(q.thread_id, 11u);
  EXPECT_EQ(q.exec_time, 2u);
  EXPECT_EQ(q.database, "weir");
  EXPECT_EQ(q.query, "CREATE TABLE t (a int)");
  EXPECT_EQ(q.status_vars.size(), 6u);

  auto heartbeat = decoder.decode(keep(event(27, "mariadb-bin.000001")));
  ASSERT_TRUE(heartbeat.ok()) << heartbeat.status();
  EXPECT_EQ(std::get<HeartbeatEvent>(heartbeat->body).log_file, "mariadb-bin.000001");

  auto annotate = decoder.decode(keep(event(160, "INSERT INTO t VALUES (1)")));
  ASSERT_TRUE(annotate.ok()) << annotate.status();
  EXPECT_EQ(std::get<AnnotateRowsEvent>(annotate->body).query, "INSERT INTO t VALUES (1)");

  auto unknown = decoder.decode(keep(event(5, "whatever")));  // INTVAR
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_TRUE(std::holds_alternative<UnknownEvent>(unknown->body));
  EXPECT_EQ(unknown->header.type, 5);

  for (uint8_t type = 165; type <= 171; ++type) {
    auto compressed = decoder.decode(keep(event(type, "zzzz")));
    ASSERT_FALSE(compressed.ok());
    EXPECT_EQ(compressed.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(compressed.status().message().find("log_bin_compress"), std::string::npos);
    EXPECT_NE(compressed.status().message().find("COMPRESSED"), std::string::npos);
  }
}

TEST(BinlogEventTest, TheSizeInTheHeaderMustMatch) {
  BinlogDecoder decoder = crc_decoder();
  std::string e = event(16, le(1, 8));
  auto decoded = decoder.decode(keep(e.substr(0, e.size() - 1)));
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("XID event: the header says 31 bytes"),
            std::string::npos)
      << decoded.status();
  EXPECT_FALSE(decoder.decode(keep("short")).ok());
}

// Every strict prefix of these bodies (the event re-framed around it, with a right checksum) is
// an error.
TEST(BinlogEventTest, EveryTruncatedBodyIsAnError) {
  const std::string types = std::string("\x03\x0f\xf6\xfe\x12", 5);
  const std::string metadata = le(40, 2) + be(0x0a02, 2) + be(0xfe0c, 2) + std::string(1, 3);
  const std::vector<std::pair<uint8_t, std::string>> bodies = {
      {15, format_description_body(ChecksumAlg::kCrc32)},
      {16, le(99, 8)},
      {162, le(5, 8) + le(0, 4) + std::string(1, 2) + le(7, 8)},
      {163, le(1, 4) + le(0, 4) + le(1, 4) + le(10, 8)},
      {161, le(3, 4) + "abc"},
      {2, le(11, 4) + le(2, 4) + std::string(1, 4) + le(0, 2) + le(0, 2) + "weir" +
              std::string(1, '\0')},
      {19, table_map_body(7, types, metadata, "\x1f")},
      {23, rows_body(7, 5, "")},
      {24, rows_body(7, 5, "", true)},
      {30, le(7, 6) + le(1, 2) + le(4, 2) + "xx" + std::string(1, 5) + "\x1f"},
  };
  for (const auto& [type, body] : bodies) {
    BinlogDecoder whole = crc_decoder();
    auto decoded = whole.decode(
        keep(type == 15 ? format_description(ChecksumAlg::kCrc32) : event(type, body)));
    ASSERT_TRUE(decoded.ok()) << event_type_name(type) << ": " << decoded.status();
    // A FORMAT_DESCRIPTION cut after 32 post-header lengths may end in a valid OFF byte.
    const size_t end = type == 15 ? 57 + 32 + 1 : body.size();
    for (size_t n = 0; n < end; ++n) {
      BinlogDecoder decoder = crc_decoder();
      auto truncated = decoder.decode(keep(event(type, body.substr(0, n))));
      ASSERT_FALSE(truncated.ok()) << event_type_name(type) << " at " << n;
      EXPECT_NE(truncated.status().message().find(event_type_name(type)), std::string::npos)
          << truncated.status();
    }
  }
}

TEST(BinlogEventTest, DecodesATableMap) {
  BinlogDecoder decoder = crc_decoder();
  const std::string types = std::string("\x03\x0f\xf6\xfe\x12\x10", 6);
  const std::string metadata =
      le(40, 2) + be(0x0a02, 2) + be(0xfe0c, 2) + std::string(1, 3) + le(0x0102, 2);
  auto decoded =
      decoder.decode(keep(event(19, table_map_body(0x123456789a, types, metadata, "\x2a"))));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const auto& map = std::get<TableMapEvent>(decoded->body);
  EXPECT_EQ(map.table_id, 0x123456789au);
  EXPECT_EQ(map.database, "weir");
  EXPECT_EQ(map.table, "t");
  ASSERT_EQ(map.column_count(), 6u);
  EXPECT_EQ(map.types[1], FieldType::kVarchar);
  EXPECT_EQ(map.metadata, (std::vector<uint16_t>{0, 40, 0x0a02, 0xfe0c, 3, 0x0102}));
  EXPECT_EQ(map.nullable, (std::vector<bool>{false, true, false, true, false, true}));
  EXPECT_TRUE(map.optional_metadata.empty());

  // Metadata that does not match the types.
  auto bad = decoder.decode(keep(event(19, table_map_body(1, types, metadata + "x", "\x2a"))));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TABLE_MAP event for table `weir`.`t`: the metadata has"),
            std::string::npos)
      << bad.status();

  // Optional metadata: signedness (column 0 of the numeric ones unsigned), column names.
  const std::string names = std::string(1, 1) + "a" + std::string(1, 1) + "b" + std::string(1, 1) +
                            "c" + std::string(1, 1) + "d" + std::string(1, 1) + "e" +
                            std::string(1, 1) + "f";
  const std::string optional = std::string(1, 1) + std::string(1, 1) + "\x80" + std::string(1, 4) +
                               std::string(1, static_cast<char>(names.size())) + names;
  auto full =
      decoder.decode(keep(event(19, table_map_body(1, types, metadata, "\x2a") + optional)));
  ASSERT_TRUE(full.ok()) << full.status();
  const auto& fmap = std::get<TableMapEvent>(full->body);
  EXPECT_EQ(fmap.column_names, (std::vector<std::string>{"a", "b", "c", "d", "e", "f"}));
  EXPECT_EQ(fmap.unsigned_numeric, (std::vector<bool>{true, false}));
  // A TLV whose length runs past the end.
  auto broken =
      decoder.decode(keep(event(19, table_map_body(1, types, metadata, "\x2a") + "\x04\x09")));
  EXPECT_FALSE(broken.ok());
  // An unknown column type: its metadata cannot be skipped.
  auto unknown = decoder.decode(keep(event(19, table_map_body(1, "\x64", "", kZero))));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
}

// ---------------------------------------------------------------------------------------------
// Row values

TEST(BinlogRowTest, Integers) {
  EXPECT_EQ(ok_value(FieldType::kTiny, "", column("tinyint"), "\x80"), "-128");
  EXPECT_EQ(ok_value(FieldType::kTiny, "", column("tinyint", "", true), "\xff"), "255");
  EXPECT_EQ(ok_value(FieldType::kShort, "", column("smallint"), le(0x8000, 2)), "-32768");
  EXPECT_EQ(ok_value(FieldType::kShort, "", column("smallint", "", true), le(65535, 2)), "65535");
  EXPECT_EQ(ok_value(FieldType::kInt24, "", column("mediumint"), le(0x800000, 3)), "-8388608");
  EXPECT_EQ(ok_value(FieldType::kInt24, "", column("mediumint"), le(0x7fffff, 3)), "8388607");
  EXPECT_EQ(ok_value(FieldType::kInt24, "", column("mediumint", "", true), le(0xffffff, 3)),
            "16777215");
  EXPECT_EQ(ok_value(FieldType::kLong, "", column("int"), le(0xffffffff, 4)), "-1");
  EXPECT_EQ(ok_value(FieldType::kLong, "", column("int", "", true), le(0xffffffff, 4)),
            "4294967295");
  EXPECT_EQ(ok_value(FieldType::kLongLong, "", column("bigint"), le(0x8000000000000000, 8)),
            "-9223372036854775808");
  EXPECT_EQ(ok_value(FieldType::kLongLong, "", column("bigint", "", true), le(~0ull, 8)),
            "18446744073709551615");
  EXPECT_EQ(ok_value(FieldType::kYear, "", column("year"), kZero), "0");
  EXPECT_EQ(ok_value(FieldType::kYear, "", column("year"), "\x7c"), "2024");
}

TEST(BinlogRowTest, Decimals) {
  const MysqlColumn d = column("decimal");
  // decimal(5,2): 3 integer digits in 2 bytes, 2 fraction digits in 1.
  const std::string m52 = std::string("\x05\x02", 2);
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m52, d, std::string("\x80\x01\x32", 3)), "1.50");
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m52, d, std::string("\x7f\xfe\xcd", 3)), "-1.50");
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m52, d, std::string("\x80\x00\x00", 3)), "0.00");
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m52, d, std::string("\x83\xe7\x63", 3)), "999.99");
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m52, d, std::string("\x7c\x18\x9c", 3)), "-999.99");
  // decimal(10,0): 1 digit in 1 byte, then 9 in 4.
  const std::string m100 = std::string("\x0a\x00", 2);
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m100, d, "\x81" + be(234567890, 4)), "1234567890");
  // decimal(20,10): 10 integer digits (1 + 9), 10 fraction digits (9 + 1).
  const std::string m2010 = std::string("\x14\x0a", 2);
  const std::string positive =
      "\x81" + be(2, 4) + be(300000000, 4) + "\x05";  // 1000000002.3000000005
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m2010, d, positive), "1000000002.3000000005");
  std::string negative = positive;
  for (char& c : negative) {
    c = static_cast<char>(~c);
  }
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, m2010, d, negative), "-1000000002.3000000005");
  // decimal(4,4): no integer digits.
  EXPECT_EQ(ok_value(FieldType::kNewDecimal, std::string("\x04\x04", 2), d,
                     std::string("\x80\x7b", 2) /* 0x007b = 123 */),
            "0.0123");
  // A group out of range.
  auto bad = decode_value(FieldType::kNewDecimal, m52, d, std::string("\x83\xe8\x00", 3));
  EXPECT_FALSE(bad.ok());
}

TEST(BinlogRowTest, Floats) {
  float f = 0.1f;
  uint32_t fbits;
  std::memcpy(&fbits, &f, 4);
  EXPECT_EQ(ok_value(FieldType::kFloat, "\x04", column("float"), le(fbits, 4)), "0.1");
  double d = -1.0 / 3;
  uint64_t dbits;
  std::memcpy(&dbits, &d, 8);
  const std::string text = ok_value(FieldType::kDouble, "\x08", column("double"), le(dbits, 8));
  EXPECT_EQ(std::strtod(text.c_str(), nullptr), d);
  d = 1e300;
  std::memcpy(&dbits, &d, 8);
  EXPECT_EQ(ok_value(FieldType::kDouble, "\x08", column("double"), le(dbits, 8)), "1e+300");
  // What no server writes still decodes, and encodes as its text does: -0, a subnormal, the
  // infinities, NaN.
  EXPECT_EQ(ok_value(FieldType::kFloat, "\x04", column("float"), le(0x80000000u, 4)), "-0");
  EXPECT_EQ(ok_value(FieldType::kFloat, "\x04", column("float"), le(1, 4)), "1e-45");
  EXPECT_EQ(ok_value(FieldType::kFloat, "\x04", column("float"), le(0xff800000u, 4)), "-inf");
  EXPECT_EQ(ok_value(FieldType::kFloat, "\x04", column("float"), le(0x7fc00001u, 4)), "nan");
  EXPECT_EQ(ok_value(FieldType::kDouble, "\x08", column("double"), le(1, 8)), "5e-324");
  EXPECT_EQ(ok_value(FieldType::kDouble, "\x08", column("double"), le(0x7ff0000000000000u, 8)),
            "inf");
}

TEST(BinlogRowTest, Bits) {
  // bit(10): 2 bytes, metadata bits 2, bytes 1.
  EXPECT_EQ(ok_value(FieldType::kBit, std::string("\x02\x01", 2), column("bit"),
                     std::string("\x02\x01", 2)),
            "1000000001");
  EXPECT_EQ(ok_value(FieldType::kBit, std::string("\x01\x00", 2), column("bit"), "\x01"), "1");
  EXPECT_EQ(ok_value(FieldType::kBit, std::string("\x00\x08", 2), column("bit"), be(5, 8)),
            std::string(61, '0') + "101");
}

TEST(BinlogRowTest, Strings) {
  const MysqlColumn utf8 = column("varchar", "utf8mb4");
  EXPECT_EQ(ok_value(FieldType::kVarchar, le(40, 2), utf8, "\x05h\xc3\xa9ll"), "h\xc3\xa9ll");
  EXPECT_EQ(ok_value(FieldType::kVarchar, le(400, 2), utf8, le(3, 2) + "abc"), "abc");
  auto invalid = decode_value(FieldType::kVarchar, le(40, 2), utf8, "\x02\xc3\x28");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("column 0 `c` (VARCHAR): invalid utf8mb4"),
            std::string::npos)
      << invalid.status();
  // Checked eight ASCII bytes at a time, then byte by byte: the offset named is exact.
  const std::string long_text =
      "0123456789ab\xc3\xa9"
      "cdefghij\xff"
      "klm";
  EXPECT_EQ(ok_value(FieldType::kVarchar, le(40, 2), utf8, "\x14" + long_text.substr(0, 20)),
            long_text.substr(0, 20));
  auto late = decode_value(FieldType::kVarchar, le(40, 2), utf8, "\x1a" + long_text);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("invalid utf8mb4 at byte 22 of the value"),
            std::string::npos)
      << late.status();
  // latin1 is Windows-1252.
  EXPECT_EQ(
      ok_value(FieldType::kVarchar, le(10, 2), column("varchar", "latin1"), "\x03\x80\xe9\x81"),
      "\xe2\x82\xac\xc3\xa9\xc2\x81");
  EXPECT_FALSE(
      decode_value(FieldType::kVarchar, le(10, 2), column("varchar", "ascii"), "\x01\x80").ok());
  auto other = decode_value(FieldType::kVarchar, le(10, 2), column("varchar", "sjis"),
                            "\x01"
                            "a");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnimplemented);
  // char(10) utf8mb4: STRING, real type 0xfe, 40 bytes; trailing spaces removed.
  EXPECT_EQ(ok_value(FieldType::kString, std::string("\xfe\x28", 2), column("char", "utf8mb4"),
                     "\x04"
                     "ab  "),
            "ab");
  // char(100) utf8mb4: 400 bytes, the length's high bits in the type byte: 400 = 0x190.
  // (0x30 ^ (0x1 << 4)) = 0x20 -> type byte 0xee.
  EXPECT_EQ(ok_value(FieldType::kString, std::string("\xee\x90", 2), column("char", "utf8mb4"),
                     le(2, 2) + "xy"),
            "xy");
  // binary(4): padded back with 0 bytes.
  EXPECT_EQ(
      ok_value(FieldType::kString, std::string("\xfe\x04", 2), column("binary"), "\x02\x01\x02"),
      "\\x01020000");
  EXPECT_EQ(
      ok_value(FieldType::kVarchar, le(10, 2), column("varbinary"), std::string("\x02\x00\xff", 3)),
      "\\x00ff");
  // Blobs and texts: a 1-4 byte length.
  EXPECT_EQ(ok_value(FieldType::kBlob, "\x02", column("blob"), le(2, 2) + "\xde\xad"), "\\xdead");
  EXPECT_EQ(ok_value(FieldType::kBlob, "\x04", column("longtext", "utf8mb4"), le(3, 4) + "{}x"),
            "{}x");
  EXPECT_EQ(ok_value(FieldType::kBlob, "\x01", column("tinytext", "utf8mb4"), kZero), "");
  // A length past the end.
  EXPECT_FALSE(decode_value(FieldType::kBlob, "\x03", column("mediumtext", "utf8mb4"),
                            le(0xffffff, 3) + "abc")
                   .ok());
}

TEST(BinlogRowTest, EnumsAndSets) {
  MysqlColumn e = column("enum", "utf8mb4");
  e.elements = {"small", "medium", "large"};
  EXPECT_EQ(ok_value(FieldType::kString, std::string("\xf7\x01", 2), e, "\x02"), "medium");
  EXPECT_EQ(ok_value(FieldType::kString, std::string("\xf7\x01", 2), e, kZero), "");
  EXPECT_FALSE(decode_value(FieldType::kString, std::string("\xf7\x01", 2), e, "\x04").ok());
  MysqlColumn s = column("set", "utf8mb4");
  s.elements = {"a", "b", "c"};
  EXPECT_EQ(ok_value(FieldType::kString, std::string("\xf8\x01", 2), s, "\x05"), "a,c");
  EXPECT_EQ(ok_value(FieldType::kString, std::string("\xf8\x01", 2), s, kZero), "");
  EXPECT_FALSE(decode_value(FieldType::kString, std::string("\xf8\x01", 2), s, "\x08").ok());
}

TEST(BinlogRowTest, DatesAndTimes) {
  // DATE: day | month << 5 | year << 9.
  EXPECT_EQ(ok_value(FieldType::kDate, "", column("date"), le(31 | 12 << 5 | 2024 << 9, 3)),
            "2024-12-31");
  EXPECT_EQ(ok_value(FieldType::kDate, "", column("date"), le(1 | 1 << 5 | 0 << 9, 3)),
            "0001-01-01 BC");
  auto zero = decode_value(FieldType::kDate, "", column("date"), le(0, 3));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("column 0 `c` (DATE): a zero date"), std::string::npos)
      << zero.status();
  EXPECT_FALSE(
      decode_value(FieldType::kDate, "", column("date"), le(29 | 2 << 5 | 2023 << 9, 3)).ok());

  // DATETIME2: 5 bytes of (((year * 13 + month) << 5 | day) << 17 | hour << 12 | min << 6 | sec)
  // + 0x8000000000, big-endian, then the fraction.
  auto datetime = [](uint64_t y, uint64_t mo, uint64_t d, uint64_t h, uint64_t mi, uint64_t s) {
    return be(((((y * 13 + mo) << 5 | d) << 17) | h << 12 | mi << 6 | s) + 0x8000000000, 5);
  };
  EXPECT_EQ(
      ok_value(FieldType::kDatetime2, kZero, column("datetime"), datetime(2024, 2, 29, 23, 59, 58)),
      "2024-02-29 23:59:58");
  EXPECT_EQ(ok_value(FieldType::kDatetime2, "\x03", column("datetime"),
                     datetime(1000, 1, 1, 0, 0, 0) + be(1230, 2)),
            "1000-01-01 00:00:00.123");
  EXPECT_EQ(ok_value(FieldType::kDatetime2, "\x06", column("datetime"),
                     datetime(9999, 12, 31, 23, 59, 59) + be(999999, 3)),
            "9999-12-31 23:59:59.999999");
  EXPECT_EQ(ok_value(FieldType::kDatetime2, "\x01", column("datetime"),
                     datetime(2000, 6, 1, 1, 2, 3) + be(50, 1)),
            "2000-06-01 01:02:03.5");
  EXPECT_FALSE(
      decode_value(FieldType::kDatetime2, kZero, column("datetime"), datetime(0, 0, 0, 0, 0, 0))
          .ok());
  // A fraction finer than the column's precision (not written by a server; 1239 for .123 with
  // 3 digits) is cut to it, in the text and in the encoding alike.
  EXPECT_EQ(ok_value(FieldType::kDatetime2, "\x03", column("datetime"),
                     datetime(2024, 1, 1, 0, 0, 0) + be(1239, 2)),
            "2024-01-01 00:00:00.123");
  EXPECT_EQ(ok_value(FieldType::kDatetime2, "\x01", column("datetime"),
                     datetime(0, 2, 29, 0, 0, 0) + be(7, 1)),
            "0001-02-29 00:00:00.0 BC");

  // TIMESTAMP2: seconds since the epoch, big-endian, then the fraction; printed in UTC.
  EXPECT_EQ(ok_value(FieldType::kTimestamp2, kZero, column("timestamp"), be(1, 4)),
            "1970-01-01 00:00:01+00");
  EXPECT_EQ(ok_value(FieldType::kTimestamp2, "\x06", column("timestamp"),
                     be(2147483647, 4) + be(999999, 3)),
            "2038-01-19 03:14:07.999999+00");
  EXPECT_EQ(
      ok_value(FieldType::kTimestamp2, "\x02", column("timestamp"), be(1700000000, 4) + "\x07"),
      "2023-11-14 22:13:20.07+00");
  EXPECT_FALSE(decode_value(FieldType::kTimestamp2, kZero, column("timestamp"), be(0, 4)).ok());
  EXPECT_EQ(ok_value(FieldType::kTimestamp2, "\x05", column("timestamp"),
                     be(1700000000, 4) + be(99999, 3)),
            "2023-11-14 22:13:20.09999+00");

  // TIME2: (hour << 12 | min << 6 | sec) + 0x800000 in 3 bytes, then the fraction; negative
  // values are the two's complement of the whole packed value.
  auto time = [](int64_t h, int64_t mi, int64_t s, int64_t micros, int digits) {
    int64_t packed = (h << 12 | mi << 6 | s) << 24 | micros;
    if (digits >= 5) {
      return be(static_cast<uint64_t>(0x800000000000 + packed), 6);
    }
    const int size = (digits + 1) / 2;
    return be(static_cast<uint64_t>((packed >> 24) + 0x800000), 3) +
           (size == 0 ? std::string() : be(0, size));
  };
  EXPECT_EQ(ok_value(FieldType::kTime2, kZero, column("time"), time(12, 34, 56, 0, 0)), "12:34:56");
  EXPECT_EQ(ok_value(FieldType::kTime2, kZero, column("time"), time(838, 59, 59, 0, 0)),
            "838:59:59");
  EXPECT_EQ(ok_value(FieldType::kTime2, kZero, column("time"), time(1, 2, 3, 0, 0)), "01:02:03");
  EXPECT_EQ(ok_value(FieldType::kTime2, "\x06", column("time"), time(1, 2, 3, 456789, 6)),
            "01:02:03.456789");
  // -00:00:01 with no fraction: the packed value is -(1 << 24).
  EXPECT_EQ(ok_value(FieldType::kTime2, kZero, column("time"), be(0x800000 - 1, 3)), "-00:00:01");
  // -838:59:59.000000 (6 digits).
  EXPECT_EQ(
      ok_value(
          FieldType::kTime2, "\x06", column("time"),
          be(static_cast<uint64_t>(0x800000000000 - (int64_t{838 << 12 | 59 << 6 | 59} << 24)), 6)),
      "-838:59:59.000000");
  // -00:00:00.5 with 1 digit: intpart -1 and frac 0x100 - 50 (MySQL's reversed fraction).
  EXPECT_EQ(ok_value(FieldType::kTime2, "\x01", column("time"), be(0x800000 - 1, 3) + be(0xce, 1)),
            "-00:00:00.5");
  // 3 digits: 12:00:00.123 -> 1230 in 2 bytes.
  EXPECT_EQ(ok_value(FieldType::kTime2, "\x03", column("time"),
                     be(0x800000 + (12 << 12), 3) + be(1230, 2)),
            "12:00:00.123");

  // The old formats (no fraction).
  EXPECT_EQ(ok_value(FieldType::kDatetime, "", column("datetime"), le(20240102030405, 8)),
            "2024-01-02 03:04:05");
  EXPECT_EQ(ok_value(FieldType::kTime, "", column("time"),
                     le(static_cast<uint32_t>(-102030) & 0xffffff, 3)),
            "-10:20:30");
  EXPECT_EQ(ok_value(FieldType::kTimestamp, "", column("timestamp"), le(86400, 4)),
            "1970-01-02 00:00:00+00");
  MysqlColumn hires = column("datetime");
  hires.scale = 3;
  auto old = decode_value(FieldType::kDatetime, "", hires, le(0, 8));
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(BinlogRowTest, UnsupportedTypesAndMismatchesNameTheColumn) {
  auto geometry = decode_value(FieldType::kGeometry, "\x04", column("geometry"), "");
  ASSERT_FALSE(geometry.ok());
  EXPECT_EQ(geometry.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(geometry.status().message().find("column 0 `c` (GEOMETRY)"), std::string::npos)
      << geometry.status();
  auto json = decode_value(FieldType::kJson, "\x04", column("json"), "");
  ASSERT_FALSE(json.ok());
  auto mismatch = decode_value(FieldType::kLong, "", column("varchar", "utf8mb4"), le(1, 4));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("binlog type LONG but the catalog says varchar"),
            std::string::npos)
      << mismatch.status();
}

// A table map and rows event of no columns (no server writes one): its rows would take no
// bytes, so bytes after them are an error, not rows without end (binlog_fuzz found the hang).
TEST(BinlogRowTest, RowsOfNoColumnsAreAnError) {
  BinlogDecoder decoder = crc_decoder();
  auto map = decoder.decode(keep(event(19, table_map_body(7, "", "", ""))));
  ASSERT_TRUE(map.ok()) << map.status();
  const auto& table = std::get<TableMapEvent>(map->body);
  auto rows = decoder.decode(keep(event(23, rows_body(7, 0, "xy"))));
  ASSERT_TRUE(rows.ok()) << rows.status();
  RowDecoder row_decoder;
  absl::Status status = row_decoder.decode(table, std::get<RowsEvent>(rows->body), {},
                                           [](auto, auto) { return absl::OkStatus(); });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("WRITE_ROWS_V1 event for table `weir`.`t`"), std::string::npos)
      << status;
  status = row_decoder.encode(table, std::get<RowsEvent>(rows->body), {}, {},
                              [](auto, auto) { return absl::OkStatus(); });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("WRITE_ROWS_V1 event for table `weir`.`t`"), std::string::npos)
      << status;
  // No bytes, no rows.
  auto none = decoder.decode(keep(event(23, rows_body(7, 0, ""))));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(row_decoder
                  .decode(table, std::get<RowsEvent>(none->body), {},
                          [](auto, auto) -> absl::Status { return absl::InternalError("a row"); })
                  .ok());
}

TEST(BinlogRowTest, UpdatesNullsAndImages) {
  BinlogDecoder decoder = crc_decoder();
  auto map = decoder.decode(keep(event(19, table_map_body(7, "\x03\x0f", le(20, 2), "\x02"))));
  ASSERT_TRUE(map.ok()) << map.status();
  const MysqlColumn columns[] = {column("int"), column("varchar", "utf8mb4")};
  // Two rows: (1, NULL) -> (1, 'x'), (2, 'a') -> (NULL... no: 3, 'b').
  const std::string images = std::string("\x02", 1) + le(1, 4) + std::string("\x00", 1) + le(1, 4) +
                             "\x01x" + std::string("\x00", 1) + le(2, 4) +
                             "\x01"
                             "a" +
                             std::string("\x00", 1) + le(3, 4) +
                             "\x01"
                             "b";
  auto rows = decoder.decode(keep(event(24, rows_body(7, 2, images, true))));
  ASSERT_TRUE(rows.ok()) << rows.status();
  RowDecoder row_decoder;
  std::vector<std::string> seen;
  auto render = [](std::span<const TextField> image) {
    std::string out;
    for (const TextField& f : image) {
      out += f.is_null ? std::string("NULL") : std::string(f.text);
      out += "|";
    }
    return out;
  };
  ASSERT_TRUE(row_decoder
                  .decode(std::get<TableMapEvent>(map->body), std::get<RowsEvent>(rows->body),
                          columns,
                          [&](std::span<const TextField> before, std::span<const TextField> after) {
                            seen.push_back(render(before) + " -> " + render(after));
                            return absl::OkStatus();
                          })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"1|NULL| -> 1|x|", "2|a| -> 3|b|"}));

  // Every truncation of the row images is an error.
  const auto& table = std::get<TableMapEvent>(map->body);
  for (size_t n = 1; n < images.size(); ++n) {
    if (n == 12) {
      continue;  // Exactly the first row.
    }
    auto cut = decoder.decode(keep(event(24, rows_body(7, 2, images.substr(0, n), true))));
    ASSERT_TRUE(cut.ok());
    absl::Status status = row_decoder.decode(table, std::get<RowsEvent>(cut->body), columns,
                                             [](auto, auto) { return absl::OkStatus(); });
    EXPECT_FALSE(status.ok()) << n;
  }

  // A partial image (binlog_row_image=MINIMAL).
  std::string partial = rows_body(7, 2, images, true);
  partial[9] = '\x01';
  auto minimal = decoder.decode(keep(event(24, partial)));
  ASSERT_TRUE(minimal.ok());
  absl::Status status = row_decoder.decode(table, std::get<RowsEvent>(minimal->body), columns,
                                           [](auto, auto) { return absl::OkStatus(); });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("binlog_row_image must be FULL"), std::string::npos) << status;

  // Column counts that differ.
  auto three = decoder.decode(keep(event(24, rows_body(7, 3, "", true))));
  ASSERT_TRUE(three.ok());
  status = row_decoder.decode(table, std::get<RowsEvent>(three->body), columns,
                              [](auto, auto) { return absl::OkStatus(); });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("UPDATE_ROWS_V1 event for table `weir`.`t`: the event has 3 "
                                  "columns, the table map 2, the catalog 2"),
            std::string::npos)
      << status;
  status = row_decoder.decode(table, std::get<RowsEvent>(rows->body),
                              std::span<const MysqlColumn>(columns, 1),
                              [](auto, auto) { return absl::OkStatus(); });
  EXPECT_FALSE(status.ok());

  // A v2 event with extra data; a delete.
  auto v2 =
      decoder.decode(keep(event(32, le(7, 6) + le(1, 2) + le(5, 2) + "abc" + std::string(1, 2) +
                                        "\x03" + std::string("\x02", 1) + le(9, 4))));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(std::get<RowsEvent>(v2->body).extra_data, "abc");
  seen.clear();
  ASSERT_TRUE(row_decoder
                  .decode(table, std::get<RowsEvent>(v2->body), columns,
                          [&](std::span<const TextField> before, std::span<const TextField> after) {
                            seen.push_back(render(before) + " -> " + render(after));
                            return absl::OkStatus();
                          })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"9|NULL| -> "}));
}

// ---------------------------------------------------------------------------------------------
// Against MariaDB 10.11

class MariadbBinlogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto info = parse_conninfo(weir::testing::mariadb_test_conn());
    ASSERT_TRUE(info.ok()) << info.status();
    info_ = *info;
    auto conn = MysqlConnection::connect(info_, "binlog test");
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_.emplace(std::move(*conn));
  }

  void exec(std::string_view sql) {
    absl::Status status = conn_->exec(sql);
    ASSERT_TRUE(status.ok()) << sql << ": " << status;
  }

  std::string scalar(std::string_view sql) {
    auto rows = conn_->rows(sql);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok() || rows->empty() || (*rows)[0].empty() || !(*rows)[0][0]) {
      return "";
    }
    return *(*rows)[0][0];
  }

  // Every event of a non-blocking GTID dump from `gtid_start`, decoded; rows of the tables in
  // `catalog` rendered "table: before -> after" with "|" after each value.
  struct Dump {
    std::vector<std::string> rows;
    std::vector<std::string> event_types;
    std::vector<std::string> errors;
    std::vector<GtidEvent> gtids;
    // Per table, per first column's text: the row as the binlog left it.
    std::map<std::string, std::map<std::string, std::vector<std::optional<std::string>>>> state;
    std::string stream;  // Every event's bytes, concatenated.
  };

  Dump dump(const std::string& gtid_start,
            const std::map<std::string, std::vector<MysqlColumn>>& catalog,
            const std::string& seed_prefix) {
    Dump out;
    auto conn = MysqlConnection::connect(info_, "binlog dump");
    EXPECT_TRUE(conn.ok()) << conn.status();
    if (!conn.ok()) {
      return out;
    }
    BinlogDumpOptions options;
    options.gtid_start = gtid_start;
    options.server_id = 4242;
    options.non_blocking = true;
    auto dump = BinlogDump::open(*conn, options);
    EXPECT_TRUE(dump.ok()) << dump.status();
    if (!dump.ok()) {
      return out;
    }
    const char* seed_dir = std::getenv("WEIR_BINLOG_SEED_DIR");
    BinlogDecoder decoder(dump->checksum());
    RowDecoder rows;
    std::map<uint64_t, TableMapEvent> tables;
    for (int i = 0;; ++i) {
      auto bytes = dump->fetch();
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      if (!bytes.ok() || !bytes->has_value()) {
        break;
      }
      if (seed_dir != nullptr && (*bytes)->size() >= kEventHeaderSize) {
        std::ofstream(absl::StrCat(seed_dir, "/", seed_prefix, "-", i, "-",
                                   event_type_name(static_cast<uint8_t>((**bytes)[4]))),
                      std::ios::binary)
            << **bytes;
      }
      out.stream += **bytes;
      auto event = decoder.decode(**bytes);
      if (!event.ok()) {
        out.errors.push_back(std::string(event.status().message()));
        continue;
      }
      out.event_types.push_back(event_type_name(event->header.type));
      if (auto* gtid = std::get_if<GtidEvent>(&event->body)) {
        out.gtids.push_back(*gtid);
      } else if (auto* map = std::get_if<TableMapEvent>(&event->body)) {
        tables[map->table_id] = std::move(*map);
      } else if (auto* change = std::get_if<RowsEvent>(&event->body)) {
        const TableMapEvent& table = tables.at(change->table_id);
        auto columns = catalog.find(table.table);
        if (columns == catalog.end()) {
          continue;
        }
        auto render = [](std::span<const TextField> image) {
          std::string text;
          for (const TextField& f : image) {
            text += f.is_null ? std::string("NULL") : std::string(f.text);
            text += "|";
          }
          return text;
        };
        absl::Status status = rows.decode(
            table, *change, columns->second,
            [&](std::span<const TextField> before, std::span<const TextField> after) {
              out.rows.push_back(table.table + ": " + render(before) + " -> " + render(after));
              auto& state = out.state[table.table];
              if (!before.empty()) {
                state.erase(std::string(before[0].text));
              }
              if (!after.empty()) {
                auto& row = state[std::string(after[0].text)];
                for (const TextField& f : after) {
                  row.push_back(f.is_null ? std::nullopt
                                          : std::optional<std::string>(std::string(f.text)));
                }
              }
              return absl::OkStatus();
            });
        if (!status.ok()) {
          out.errors.push_back(std::string(status.message()));
        }
        // The row encoding straight from the images is the one RowEncoder makes of the text.
        auto desc = relation_desc(table.database, table.table, columns->second);
        if (!desc.ok()) {
          continue;
        }
        RowEncoder encoder(*desc);
        std::vector<postgres::ColumnType> types;
        for (const auto& column : desc->columns) {
          types.push_back(column.type);
        }
        std::vector<std::string> from_text;
        std::vector<std::string> direct;
        auto encode_text = [&](std::span<const TextField> image) {
          if (!image.empty()) {
            std::string row;
            const absl::Status encoded = encoder.encode(image, row);
            from_text.push_back(encoded.ok() ? row : "error");
          }
        };
        (void)rows.decode(table, *change, columns->second,
                          [&](std::span<const TextField> before, std::span<const TextField> after) {
                            encode_text(before);
                            encode_text(after);
                            return absl::OkStatus();
                          });
        const absl::Status encoded =
            RowDecoder().encode(table, *change, columns->second, types,
                                [&](std::string_view before, std::string_view after) {
                                  for (std::string_view image : {before, after}) {
                                    if (!image.empty()) direct.emplace_back(image);
                                  }
                                  return absl::OkStatus();
                                });
        EXPECT_EQ(encoded.ok(), status.ok()) << encoded << " vs " << status;
        if (encoded.ok() && status.ok()) {
          EXPECT_EQ(direct, from_text) << "rows of " << table.table;
        }
      }
    }
    if (seed_dir != nullptr) {
      std::ofstream(absl::StrCat(seed_dir, "/", seed_prefix, "-stream"), std::ios::binary)
          << out.stream;
    }
    return out;
  }

  // `table` through the snapshot's path: SELECT select_expression(...) and canonical_from_select,
  // by first column's text.
  std::map<std::string, std::vector<std::optional<std::string>>> select_canonical(
      const std::string& table, const std::vector<MysqlColumn>& columns) {
    std::map<std::string, std::vector<std::optional<std::string>>> out;
    std::string sql = "SELECT ";
    for (size_t i = 0; i < columns.size(); ++i) {
      sql += (i == 0 ? "" : ", ") + select_expression(columns[i]);
    }
    sql += " FROM " + quote_identifier(table);
    auto rows = conn_->rows(sql);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) {
      return out;
    }
    for (const auto& row : *rows) {
      std::vector<std::optional<std::string>> values;
      for (size_t i = 0; i < row.size(); ++i) {
        if (!row[i]) {
          values.emplace_back();
          continue;
        }
        std::string text;
        absl::Status status = canonical_from_select(columns[i], *row[i], text);
        EXPECT_TRUE(status.ok()) << status;
        values.emplace_back(text);
      }
      out[values[0].value_or("")] = values;
    }
    return out;
  }

  ConnInfo info_;
  std::optional<MysqlConnection> conn_;
};

MysqlColumn col(std::string name, std::string data_type, std::string charset = "",
                bool is_unsigned = false) {
  MysqlColumn c = column(std::move(data_type), std::move(charset), is_unsigned);
  c.name = std::move(name);
  return c;
}

TEST_F(MariadbBinlogTest, MariadbDecodesEveryTypeFromAGtidDump) {
  exec("DROP TABLE IF EXISTS bl_numbers, bl_strings, bl_times");
  exec(
      "CREATE TABLE bl_numbers (id int PRIMARY KEY, ti tinyint, tiu tinyint unsigned, "
      "si smallint, siu smallint unsigned, mi mediumint, miu mediumint unsigned, i int, "
      "iu int unsigned, bi bigint, biu bigint unsigned, d decimal(10,2), d2 decimal(30,15), "
      "f float, db double, b bit(10), y year)");
  exec(
      "CREATE TABLE bl_strings (id int PRIMARY KEY, vc varchar(20), c char(5), "
      "cl char(100), l1 varchar(10) CHARACTER SET latin1, a varchar(5) CHARACTER SET ascii, "
      "bn binary(4), vb varbinary(8), t text, bl blob, j json, e enum('x','y','z'), "
      "s set('p','q','r'))");
  exec(
      "CREATE TABLE bl_times (id int PRIMARY KEY, d date, t time, t3 time(3), dt datetime, "
      "dt6 datetime(6), ts timestamp NULL, ts2 timestamp(2) NULL)");
  const std::string start = scalar("SELECT @@gtid_binlog_pos");

  exec(
      "INSERT INTO bl_numbers VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, "
      "-2147483648, 4294967295, -9223372036854775808, 18446744073709551615, -12345678.90, "
      "-123456789012345.123456789012345, 0.1, -2.5e-300, b'1000000001', 2155)");
  exec("INSERT INTO bl_numbers (id) VALUES (2)");
  exec(
      "INSERT INTO bl_strings VALUES (1, 'héllo wörld', 'ab   ', 'padded  ', "
      "'caf\xc3\xa9\xe2\x82\xac', "
      "'plain', x'0102', x'00ff00', 'some text', x'deadbeef', '{\"k\": [1, 2]}', 'y', 'p,r')");
  exec("INSERT INTO bl_strings (id) VALUES (2)");
  exec("SET time_zone = '+00:00'");
  exec(
      "INSERT INTO bl_times VALUES (1, '2024-02-29', '-838:59:59', '12:34:56.789', "
      "'1000-01-01 00:00:00', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07', "
      "'1970-01-01 00:00:01.5')");
  exec("INSERT INTO bl_times (id) VALUES (2)");
  exec("UPDATE bl_numbers SET ti = 5, d = 0.5 WHERE id = 2");
  exec("DELETE FROM bl_strings WHERE id = 2");
  exec("BEGIN");
  exec("UPDATE bl_numbers SET f = 1.5 WHERE id = 1");
  exec("UPDATE bl_times SET t = '00:00:00.5' WHERE id = 2");
  exec("COMMIT");

  std::map<std::string, std::vector<MysqlColumn>> catalog;
  catalog["bl_numbers"] = {col("id", "int"),
                           col("ti", "tinyint"),
                           col("tiu", "tinyint", "", true),
                           col("si", "smallint"),
                           col("siu", "smallint", "", true),
                           col("mi", "mediumint"),
                           col("miu", "mediumint", "", true),
                           col("i", "int"),
                           col("iu", "int", "", true),
                           col("bi", "bigint"),
                           col("biu", "bigint", "", true),
                           col("d", "decimal"),
                           col("d2", "decimal"),
                           col("f", "float"),
                           col("db", "double"),
                           col("b", "bit"),
                           col("y", "year")};
  MysqlColumn e = col("e", "enum", "utf8mb4");
  e.elements = {"x", "y", "z"};
  MysqlColumn s = col("s", "set", "utf8mb4");
  s.elements = {"p", "q", "r"};
  MysqlColumn j = col("j", "longtext", "utf8mb4");
  j.is_json = true;
  catalog["bl_strings"] = {col("id", "int"),
                           col("vc", "varchar", "utf8mb4"),
                           col("c", "char", "utf8mb4"),
                           col("cl", "char", "utf8mb4"),
                           col("l1", "varchar", "latin1"),
                           col("a", "varchar", "ascii"),
                           col("bn", "binary"),
                           col("vb", "varbinary"),
                           col("t", "text", "utf8mb4"),
                           col("bl", "blob"),
                           j,
                           e,
                           s};
  MysqlColumn t3 = col("t3", "time");
  t3.scale = 3;
  MysqlColumn dt6 = col("dt6", "datetime");
  dt6.scale = 6;
  MysqlColumn ts2 = col("ts2", "timestamp");
  ts2.scale = 2;
  catalog["bl_times"] = {col("id", "int"),       col("d", "date"),
                         col("t", "time"),       t3,
                         col("dt", "datetime"),  dt6,
                         col("ts", "timestamp"), ts2};

  // The catalog's view agrees with the hand-made one where the decoder looks.
  for (auto& [table, columns] : catalog) {
    auto loaded = load_columns(*conn_, info_.database, table);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_EQ(loaded->size(), columns.size()) << table;
    for (size_t i = 0; i < columns.size(); ++i) {
      EXPECT_EQ((*loaded)[i].name, columns[i].name);
      EXPECT_EQ((*loaded)[i].data_type, columns[i].data_type) << columns[i].name;
      EXPECT_EQ((*loaded)[i].is_unsigned, columns[i].is_unsigned) << columns[i].name;
      EXPECT_EQ((*loaded)[i].elements, columns[i].elements) << columns[i].name;
      EXPECT_EQ((*loaded)[i].is_json, columns[i].is_json) << columns[i].name;
      if (!columns[i].charset.empty()) {
        EXPECT_EQ((*loaded)[i].charset, columns[i].charset) << columns[i].name;
      }
    }
    columns = *loaded;
  }

  Dump result = dump(start, catalog, "EveryType");
  EXPECT_TRUE(result.errors.empty()) << result.errors[0];
  const std::string n17 =
      "NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|";
  const std::vector<std::string> expected = {
      // NOLINTNEXTLINE(bugprone-suspicious-missing-comma): long rows are split over lines.
      "bl_numbers:  -> 1|-128|255|-32768|65535|-8388608|16777215|-2147483648|4294967295|"
      "-9223372036854775808|18446744073709551615|-12345678.90|-123456789012345.123456789012345|"
      "0.1|-2.5e-300|1000000001|2155|",
      "bl_numbers:  -> 2|" + n17 + "NULL|",
      "bl_strings:  -> 1|h\xc3\xa9llo w\xc3\xb6rld|ab|padded|caf\xc3\xa9\xe2\x82\xac|plain|"
      "\\x01020000|\\x00ff00|some text|\\xdeadbeef|{\"k\": [1, 2]}|y|p,r|",
      "bl_strings:  -> 2|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|",
      "bl_times:  -> 1|2024-02-29|-838:59:59|12:34:56.789|1000-01-01 00:00:00|"
      "9999-12-31 23:59:59.999999|2038-01-19 03:14:07+00|1970-01-01 00:00:01.50+00|",
      "bl_times:  -> 2|NULL|NULL|NULL|NULL|NULL|NULL|NULL|",
      "bl_numbers: 2|" + n17 + "NULL| -> 2|5|" +
          "NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|0.50|NULL|NULL|NULL|NULL|NULL|",
      "bl_strings: 2|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL| -> ",
      "bl_numbers: 1|-128|255|-32768|65535|-8388608|16777215|-2147483648|4294967295|"
      "-9223372036854775808|18446744073709551615|-12345678.90|-123456789012345.123456789012345|"
      "0.1|-2.5e-300|1000000001|2155| -> 1|-128|255|-32768|65535|-8388608|16777215|-2147483648|"
      "4294967295|-9223372036854775808|18446744073709551615|-12345678.90|"
      "-123456789012345.123456789012345|1.5|-2.5e-300|1000000001|2155|",
      "bl_times: 2|NULL|NULL|NULL|NULL|NULL|NULL|NULL| -> 2|NULL|00:00:00|NULL|NULL|NULL|NULL|"
      "NULL|",
  };
  EXPECT_EQ(result.rows, expected);
  // Transactions: one GTID each, the multi-statement one too; none standalone.
  ASSERT_EQ(result.gtids.size(), 9u);
  for (const GtidEvent& gtid : result.gtids) {
    EXPECT_FALSE(gtid.is_standalone());
  }
  EXPECT_EQ(result.event_types.front(), "ROTATE");
  EXPECT_EQ(result.event_types[1], "FORMAT_DESCRIPTION");

  // The binlog's last images are what the snapshot's SELECT reads, text for text.
  for (const auto& [table, columns] : catalog) {
    EXPECT_EQ(result.state[table], select_canonical(table, columns)) << table;
  }
}

}  // namespace
}  // namespace weir::sources::mysql

namespace weir::sources::mysql {
namespace {

TEST_F(MariadbBinlogTest, MariadbDdlRotationAndGtidPositions) {
  exec("DROP TABLE IF EXISTS bl_ddl");
  const std::string start = scalar("SELECT @@gtid_binlog_pos");
  exec("CREATE TABLE bl_ddl (id int PRIMARY KEY, v varchar(10))");
  exec("INSERT INTO bl_ddl VALUES (1, 'a')");
  exec("FLUSH BINARY LOGS");
  exec("INSERT INTO bl_ddl VALUES (2, 'b')");
  const std::string end = scalar("SELECT @@gtid_binlog_pos");

  std::map<std::string, std::vector<MysqlColumn>> catalog;
  catalog["bl_ddl"] = {col("id", "int"), col("v", "varchar", "utf8mb4")};
  Dump result = dump(start, catalog, "DdlRotation");
  EXPECT_TRUE(result.errors.empty()) << result.errors[0];
  EXPECT_EQ(result.rows, (std::vector<std::string>{"bl_ddl:  -> 1|a|", "bl_ddl:  -> 2|b|"}));
  // CREATE TABLE: a standalone GTID (no XID follows), then its QUERY.
  ASSERT_EQ(result.gtids.size(), 3u);
  EXPECT_TRUE(result.gtids[0].is_standalone());
  EXPECT_FALSE(result.gtids[1].is_standalone());
  EXPECT_NE(std::find(result.event_types.begin(), result.event_types.end(), "QUERY"),
            result.event_types.end());
  // The rotation: a ROTATE at the end of the old file, the new file's FORMAT_DESCRIPTION.
  EXPECT_GE(std::count(result.event_types.begin(), result.event_types.end(), "ROTATE"), 2);
  EXPECT_GE(std::count(result.event_types.begin(), result.event_types.end(), "FORMAT_DESCRIPTION"),
            2);

  // From the end: nothing.
  Dump none = dump(end, catalog, "FromTheEnd");
  EXPECT_TRUE(none.errors.empty());
  EXPECT_TRUE(none.rows.empty());

  // A position ahead of the server is an error (strict mode), from open or the first fetch.
  auto conn = MysqlConnection::connect(info_, "binlog dump");
  ASSERT_TRUE(conn.ok()) << conn.status();
  BinlogDumpOptions options;
  options.gtid_start = "0-1-999999999";
  options.server_id = 4243;
  options.non_blocking = true;
  auto ahead = BinlogDump::open(*conn, options);
  absl::Status status = ahead.status();
  if (ahead.ok()) {
    auto first = ahead->fetch();
    status = first.status();
  }
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("binlog"), std::string::npos) << status;
}

// A client that does not announce checksum awareness (@master_binlog_checksum) is refused by a
// server with binlog_checksum=CRC32: recorded in binlog_dump.h.
TEST_F(MariadbBinlogTest, MariadbRefusesADumpWithoutChecksumAnnouncement) {
  auto conn = MysqlConnection::connect(info_, "binlog dump");
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_EQ(scalar("SELECT @@global.binlog_checksum"), "CRC32");
  ASSERT_TRUE(conn->exec("SET @mariadb_slave_capability = 4, @slave_connect_state = " +
                         quote_literal(scalar("SELECT @@gtid_binlog_pos")))
                  .ok());
  MARIADB_RPL* rpl = mariadb_rpl_init(conn->raw());
  ASSERT_NE(rpl, nullptr);
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_SERVER_ID, 4244);
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_FLAGS, MARIADB_RPL_BINLOG_DUMP_NON_BLOCK);
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_START, 4UL);
  mariadb_rpl_optionsv(rpl, MARIADB_RPL_FILENAME, "", static_cast<size_t>(0));
  ASSERT_EQ(mariadb_rpl_open(rpl), 0) << mysql_error(conn->raw());
  // The artificial ROTATE comes first (without a checksum), then the error.
  std::vector<std::string> before_error;
  MARIADB_RPL_EVENT* event = nullptr;
  BinlogDecoder decoder(ChecksumAlg::kOff);
  while ((event = mariadb_rpl_fetch(rpl, event)) != nullptr) {
    auto decoded = decoder.decode(
        std::string_view(reinterpret_cast<const char*>(event->raw_data) + event->raw_data_ofs,
                         event->raw_data_size - event->raw_data_ofs));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    before_error.push_back(event_type_name(decoded->header.type));
  }
  EXPECT_EQ(before_error, std::vector<std::string>{"ROTATE"});
  EXPECT_EQ(mysql_errno(conn->raw()), 1236u);
  EXPECT_NE(std::string(mysql_error(conn->raw()))
                .find("can not handle replication events with "
                      "the checksum"),
            std::string::npos)
      << mysql_error(conn->raw());
  mariadb_rpl_close(rpl);
}

}  // namespace
}  // namespace weir::sources::mysql
