// pgoutput_fuzz: libFuzzer target for the pgoutput decoder and the replication stream's framing
// (weir/sources/postgres/pgoutput.h), everything an upstream PostgreSQL's bytes reach first.
// Each input is taken
//
//   - as one pgoutput payload, decoded outside a stream and inside one (with an xid);
//   - as one CopyData message of the replication stream (XLogData, keepalive), and an XLogData's
//     payload decoded by a PgOutputDecoder; and as a standby status update;
//   - as LSN text;
//   - when it starts with "\xffSEQ", as a stream of pgoutput messages, each an Int16 length and
//     that many bytes, fed in order to one PgOutputDecoder (protocol 2): Stream Start/Stop state.
//
// Bad input must be an error, never a crash, hang or read out of bounds. What decodes is read
// whole (every byte each view covers, and describe()), and a few oracles abort (a fuzzer "crash")
// when a property breaks: every view lies inside the input; decoding is exact (append_message of
// what decoded gives the input back, byte for byte; the same for the framing's messages); an LSN
// that parses formats to text that parses to the same LSN; an error has a message.
//
// Seeds: sources/fuzz/pgoutput/seeds/, messages captured from PostgreSQL 15 by
// tests/sources/pgoutput_test.cc (WEIR_PGOUTPUT_SEED_DIR). Build and run: run.sh [SECONDS].

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "weir/sources/postgres/pgoutput.h"

namespace {

using namespace weir::sources::postgres;  // NOLINT(google-build-using-namespace): a fuzz target.

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "pgoutput_fuzz oracle: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// Keeps the compiler from dropping the reads.
volatile size_t sink;

void touch(std::string_view view, std::string_view input) {
  if (view.empty()) {
    return;
  }
  if (view.data() < input.data() || view.data() + view.size() > input.data() + input.size()) {
    fail("a view outside the input", view.substr(0, 16));
  }
  size_t sum = 0;
  for (char c : view) {
    sum += static_cast<unsigned char>(c);
  }
  sink = sink + sum;
}

void touch(Tuple tuple, std::string_view input) {
  for (const TupleColumn& column : tuple) {
    if ((column.kind == ColumnKind::kNull || column.kind == ColumnKind::kUnchangedToast) &&
        !column.value.empty()) {
      fail("a NULL or unchanged column with a value", column.value.substr(0, 16));
    }
    touch(column.value, input);
  }
}

// Reads `message` whole and checks it re-encodes to `payload`.
void check(const Message& message, std::string_view payload) {
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Origin>) {
          touch(m.name, payload);
        } else if constexpr (std::is_same_v<M, Relation>) {
          touch(m.namespace_name, payload);
          touch(m.name, payload);
          for (const RelationColumn& column : m.columns) {
            touch(column.name, payload);
            sink = sink + column.type_oid + static_cast<uint32_t>(column.type_modifier);
          }
        } else if constexpr (std::is_same_v<M, Type>) {
          touch(m.namespace_name, payload);
          touch(m.name, payload);
        } else if constexpr (std::is_same_v<M, Insert>) {
          touch(m.new_tuple, payload);
        } else if constexpr (std::is_same_v<M, Update>) {
          if (m.old_kind == OldTupleKind::kNone && !m.old_tuple.empty()) {
            fail("an Update without an old tuple has old columns", describe(message));
          }
          touch(m.old_tuple, payload);
          touch(m.new_tuple, payload);
        } else if constexpr (std::is_same_v<M, Delete>) {
          touch(m.old_tuple, payload);
        } else if constexpr (std::is_same_v<M, Truncate>) {
          for (uint32_t oid : m.relation_oids) {
            sink = sink + oid;
          }
        } else if constexpr (std::is_same_v<M, LogicalMessage>) {
          touch(m.prefix, payload);
          touch(m.content, payload);
        }
      },
      message);
  sink = sink + describe(message).size() + message_name(message).size();
  if (message_tag(message) != payload[0]) {
    fail("message_tag differs from the tag byte", describe(message));
  }
  std::string encoded;
  append_message(message, encoded);
  if (encoded != payload) {
    fail("decoding is not exact: re-encoded differently", describe(message));
  }
}

void check_error(const absl::Status& status) {
  if (status.ok() || status.message().empty()) {
    fail("an error without a message", "");
  }
  sink = sink + status.message().size();
}

void fuzz_payload(std::string_view input) {
  static DecodeScratch scratch;  // Reused, as on the hot path.
  for (bool in_stream : {false, true}) {
    const auto message = decode_message(input, in_stream, scratch);
    if (message.ok()) {
      check(*message, input);
    } else {
      check_error(message.status());
    }
  }
}

void fuzz_framing(std::string_view input) {
  const auto frame = parse_replication_message(input);
  if (!frame.ok()) {
    check_error(frame.status());
  } else {
    sink = sink + describe(*frame).size();
    std::string encoded;
    if (const auto* data = std::get_if<XLogData>(&*frame)) {
      append_xlog_data(*data, encoded);
      touch(data->payload, input);
      PgOutputDecoder decoder(2);
      const auto message = decoder.decode(data->payload);
      if (message.ok()) {
        check(*message, data->payload);
      } else {
        check_error(message.status());
      }
    } else {
      append_primary_keepalive(std::get<PrimaryKeepalive>(*frame), encoded);
    }
    if (encoded != input) {
      fail("framing is not exact: re-encoded differently", describe(*frame));
    }
  }
  const auto update = parse_standby_status_update(input);
  if (update.ok()) {
    std::string encoded;
    append_standby_status_update(*update, encoded);
    if (encoded != input) {
      fail("a standby status update re-encoded differently", "");
    }
  } else {
    check_error(update.status());
  }
}

void fuzz_lsn(std::string_view input) {
  const auto lsn = parse_lsn(input);
  if (!lsn.ok()) {
    check_error(lsn.status());
    return;
  }
  const std::string text = format_lsn(*lsn);
  const auto again = parse_lsn(text);
  if (!again.ok() || *again != *lsn) {
    fail("an LSN does not survive format_lsn", text);
  }
}

void fuzz_sequence(std::string_view input) {
  PgOutputDecoder decoder(2);
  std::string_view rest = input;
  while (rest.size() >= 2) {
    const size_t length =
        (static_cast<unsigned char>(rest[0]) << 8) | static_cast<unsigned char>(rest[1]);
    if (rest.size() - 2 < length) {
      return;
    }
    // A copy of its own, so that ASan sees a read past this message's end.
    const std::string payload(rest.substr(2, length));
    rest.remove_prefix(2 + length);
    const bool was_in_stream = decoder.in_stream();
    const auto message = decoder.decode(payload);
    if (message.ok()) {
      check(*message, payload);
    } else {
      check_error(message.status());
      if (decoder.in_stream() != was_in_stream) {
        fail("a refused message changed the decoder's stream state", "");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSequence = "\xffSEQ";
  if (input.substr(0, kSequence.size()) == kSequence) {
    fuzz_sequence(input.substr(kSequence.size()));
  }
  fuzz_payload(input);
  fuzz_framing(input);
  fuzz_lsn(input);
  return 0;
}
