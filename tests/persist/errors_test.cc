// Bad input: every corruption is an error that names the shard and the key; nothing is skipped.

#include <filesystem>

#include "gtest/gtest.h"
#include "test_stores.h"

#include "weir/persist/client.h"
#include "weir/persist/v1/state.pb.h"

namespace weir::persist {
namespace {

class ErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir();
    location_ = PersistLocation::in_directory(dir_);
    PersistConfig config;
    config.part_target_bytes = 256;
    client_ = PersistClient::open(location_, config).value();
    WriteHandle writer = client_->open_writer("orders").value();
    std::vector<Update> updates;
    for (int i = 0; i < 40; ++i) {
      updates.push_back({"order " + std::to_string(i), 0, 1});
    }
    ASSERT_TRUE(writer.compare_and_append(updates, Frontier(0), Frontier(1)).value().is_appended());
    shard_ = writer.shard_id().str();
    blob_ = Blob::open(location_.blob_url).value();
    part_ = blob_->list_keys(shard_ + "/").value().at(0).key;
  }

  // The snapshot error, which must name the shard and `key`.
  absl::Status snapshot_error(const std::string& key, uint64_t as_of = 0) {
    ReadHandle reader = client_->open_reader("orders").value();
    absl::StatusOr<std::vector<Update>> snapshot = reader.snapshot(as_of);
    EXPECT_FALSE(snapshot.ok()) << "a damaged shard read without an error";
    const std::string message(snapshot.status().message());
    EXPECT_NE(message.find("\"orders\""), std::string::npos) << message;
    EXPECT_NE(message.find(shard_), std::string::npos) << message;
    EXPECT_NE(message.find(key), std::string::npos) << message;
    return snapshot.status();
  }

  std::string dir_;
  PersistLocation location_;
  std::unique_ptr<PersistClient> client_;
  std::unique_ptr<Blob> blob_;
  std::string shard_;
  std::string part_;
};

TEST_F(ErrorsTest, TruncatedPart) {
  const std::string path = dir_ + "/blob/" + part_;
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  EXPECT_EQ(snapshot_error(part_).code(), absl::StatusCode::kDataLoss);
}

TEST_F(ErrorsTest, CorruptPart) {
  std::string bytes = blob_->get(part_).value().value();
  bytes[bytes.size() - 5] ^= 0x5A;  // Inside the zstd frame: the checksum catches it.
  ASSERT_TRUE(blob_->set(part_, bytes).ok());
  EXPECT_EQ(snapshot_error(part_).code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(blob_->set(part_, "not a part at all").ok());
  EXPECT_EQ(snapshot_error(part_).code(), absl::StatusCode::kDataLoss);
}

// Issue 15 item 8: an empty part read as "format version 0" (FailedPrecondition: "upgrade
// weir"), and a part whose envelope had lost its version field the same.
TEST_F(ErrorsTest, EmptyPartIsCorruptNotAnUnknownVersion) {
  ASSERT_TRUE(blob_->set(part_, "").ok());
  absl::Status error = snapshot_error(part_);
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << error;
  EXPECT_NE(error.message().find("0 bytes"), std::string::npos) << error;
  EXPECT_EQ(error.message().find("format version"), std::string::npos) << error;
}

// A part of another size than the state recorded is corrupt, whatever its bytes say. Before,
// a part grown by a field the decoder skips (field 15, a varint: how a newer build may extend the
// envelope) read as if nothing had happened to it.
TEST_F(ErrorsTest, PartOfAnotherSizeThanTheStateSays) {
  std::string bytes = blob_->get(part_).value().value();
  ASSERT_TRUE(blob_->set(part_, bytes + std::string("\x78\x01", 2)).ok());
  absl::Status error = snapshot_error(part_);
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << error;
  EXPECT_NE(error.message().find("the state says " + std::to_string(bytes.size())),
            std::string::npos)
      << error;
}

TEST_F(ErrorsTest, MissingPart) {
  ASSERT_TRUE(blob_->remove(part_).ok());
  EXPECT_EQ(snapshot_error(part_).code(), absl::StatusCode::kNotFound);
}

// A snapshot of many runs merges half of them on a thread of its own: a part missing from either
// half is an error naming it, and a cursor dropped halfway stops that thread.
TEST_F(ErrorsTest, MissingPartOfASnapshotOfManyRuns) {
  WriteHandle writer = client_->open_writer("orders").value();
  for (uint64_t t = 1; t <= 10; ++t) {
    std::vector<Update> updates;
    for (uint64_t i = 0; i < 20; ++i) {
      updates.push_back(
          {"order " + std::to_string((i * 7 + t) % 20) + "/" + std::to_string(t), t, 1});
    }
    ASSERT_TRUE(
        writer.compare_and_append(updates, Frontier(t), Frontier(t + 1)).value().is_appended());
  }
  size_t runs = 0;
  const ShardDescription description = client_->describe("orders").value();
  for (const auto& batch : description.batches) {
    runs += batch.num_runs;
  }
  ASSERT_GE(runs, 16u);
  {
    ReadHandle reader = client_->open_reader("orders").value();
    SnapshotCursor cursor = reader.snapshot_cursor(10).value();
    ASSERT_TRUE(cursor.next());
  }
  const auto listed_keys = blob_->list_keys(shard_ + "/").value();
  for (const auto& listed : listed_keys) {
    const std::string bytes = blob_->get(listed.key).value().value();
    ASSERT_TRUE(blob_->remove(listed.key).ok());
    EXPECT_EQ(snapshot_error(listed.key, 10).code(), absl::StatusCode::kNotFound);
    ASSERT_TRUE(blob_->set(listed.key, bytes).ok());
  }
  ReadHandle reader = client_->open_reader("orders").value();
  EXPECT_EQ(reader.snapshot(10).value().size(), 40u + 200u);
}

TEST_F(ErrorsTest, PartOfAnotherShard) {
  WriteHandle other = client_->open_writer("other").value();
  std::vector<Update> updates = {{"x", 0, 1}};
  ASSERT_TRUE(other.compare_and_append(updates, Frontier(0), Frontier(1)).value().is_appended());
  const std::string foreign = blob_->list_keys(other.shard_id().str() + "/").value().at(0).key;
  ASSERT_TRUE(blob_->set(part_, blob_->get(foreign).value().value()).ok());
  EXPECT_EQ(snapshot_error(part_).code(), absl::StatusCode::kDataLoss);
}

// Writes `state` as the next version of the shard, as a newer (or broken) build might.
void write_next_state(const std::string& url, const std::string& shard, const std::string& bytes) {
  std::unique_ptr<Consensus> consensus = Consensus::open(url).value();
  const VersionedData head = consensus->head(shard).value().value();
  ASSERT_EQ(consensus->compare_and_set(shard, head.seqno, {head.seqno + 1, bytes}).value(),
            CasResult::kCommitted);
}

TEST_F(ErrorsTest, UnknownStateVersion) {
  std::unique_ptr<Consensus> consensus = Consensus::open(location_.consensus_url).value();
  weir::persist::v1::ProtoShardState state;
  ASSERT_TRUE(state.ParseFromString(consensus->head(shard_).value()->data));
  state.set_format_version(99);
  state.set_seqno(state.seqno() + 1);
  write_next_state(location_.consensus_url, shard_, state.SerializeAsString());
  for (const absl::Status& status :
       {client_->describe("orders").status(), client_->open_reader("orders").status(),
        client_->open_writer("orders").status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    const std::string message(status.message());
    EXPECT_NE(message.find(shard_), std::string::npos) << message;
    EXPECT_NE(message.find("format version 99"), std::string::npos) << message;
  }
}

TEST_F(ErrorsTest, CorruptState) {
  write_next_state(location_.consensus_url, shard_, "\xff\xff\xff garbage");
  const absl::Status status = client_->describe("orders").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(std::string(status.message()).find(shard_), std::string::npos) << status;
}

TEST_F(ErrorsTest, CorruptRegistryOfNames) {
  std::unique_ptr<Consensus> consensus = Consensus::open(location_.consensus_url).value();
  const VersionedData head = consensus->head("weir.shard_names").value().value();
  ASSERT_EQ(
      consensus->compare_and_set("weir.shard_names", head.seqno, {head.seqno + 1, "\xff"}).value(),
      CasResult::kCommitted);
  std::unique_ptr<PersistClient> fresh = PersistClient::open(location_).value();
  const absl::Status status = fresh->list_shards().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(std::string(status.message()).find("weir.shard_names"), std::string::npos) << status;
}

}  // namespace
}  // namespace weir::persist
