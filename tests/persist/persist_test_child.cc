// The child process of the persist integration tests.
//
//   persist_test_child race BLOB_URL CONSENSUS_URL SHARD ID
//     For each line "round R" on stdin: compare_and_append the batch [R, R+1) holding the update
//     "p<ID>-r<R>", expecting upper R, and print "won R" or "lost R <current upper>".
//
//   persist_test_child crash-writer BLOB_URL CONSENSUS_URL SHARD
//     Prints "ready", then appends crash_batch(i) for i = upper / 10, 11, ... forever, printing
//     "ok <new upper>" after each append returns, and running maintenance when it is due. The
//     test kills it with SIGKILL at a random moment.

#include <cstdio>
#include <iostream>
#include <string>

#include "persist_test_util.h"

#include "weir/persist/client.h"

namespace weir::persist {
namespace {

int fail(const absl::Status& status) {
  std::cerr << "persist_test_child: " << status << std::endl;
  return 1;
}

int race(const PersistLocation& location, const std::string& shard, const std::string& id) {
  absl::StatusOr<std::unique_ptr<PersistClient>> client = PersistClient::open(location);
  if (!client.ok()) {
    return fail(client.status());
  }
  absl::StatusOr<WriteHandle> writer = (*client)->open_writer(shard, "race " + id);
  if (!writer.ok()) {
    return fail(writer.status());
  }
  std::string word;
  uint64_t round;
  while (std::cin >> word >> round) {
    const std::vector<Update> updates = {{"p" + id + "-r" + std::to_string(round), round, 1}};
    absl::StatusOr<AppendResult> result =
        writer->compare_and_append(updates, Frontier(round), Frontier(round + 1));
    if (!result.ok()) {
      return fail(result.status());
    }
    if (result->is_appended()) {
      std::cout << "won " << round << std::endl;
    } else {
      std::cout << "lost " << round << " " << result->mismatch->current.to_string() << std::endl;
    }
  }
  return 0;
}

int crash_writer(const PersistLocation& location, const std::string& shard) {
  PersistConfig config;
  config.part_target_bytes = 4 << 10;  // Many parts per batch: more moments to be killed in.
  config.maintenance_batch_threshold = 6;
  absl::StatusOr<std::unique_ptr<PersistClient>> client = PersistClient::open(location, config);
  if (!client.ok()) {
    return fail(client.status());
  }
  absl::StatusOr<WriteHandle> writer = (*client)->open_writer(shard, "crash writer");
  if (!writer.ok()) {
    return fail(writer.status());
  }
  std::cout << "ready" << std::endl;
  Frontier upper = writer->upper();
  while (true) {
    const uint64_t index = upper.time() / testing::kCrashBatchWidth;
    const Frontier next((index + 1) * testing::kCrashBatchWidth);
    absl::StatusOr<AppendResult> result =
        writer->compare_and_append(testing::crash_batch(index), upper, next);
    if (!result.ok()) {
      return fail(result.status());
    }
    if (!result->is_appended()) {
      return fail(absl::InternalError("lost an append with no other writer: " +
                                      result->mismatch->current.to_string()));
    }
    std::cout << "ok " << next.time() << std::endl;
    upper = next;
    if (result->maintenance_due) {
      const absl::Status maintained = (*client)->maintain(shard);
      if (!maintained.ok()) {
        return fail(maintained);
      }
    }
  }
}

}  // namespace
}  // namespace weir::persist

int main(int argc, char** argv) {
  using weir::persist::PersistLocation;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "race" && argc == 6) {
    return weir::persist::race(PersistLocation{argv[2], argv[3]}, argv[4], argv[5]);
  }
  if (mode == "crash-writer" && argc == 5) {
    return weir::persist::crash_writer(PersistLocation{argv[2], argv[3]}, argv[4]);
  }
  std::cerr << "usage: persist_test_child race BLOB CONSENSUS SHARD ID\n"
               "       persist_test_child crash-writer BLOB CONSENSUS SHARD\n";
  return 2;
}
