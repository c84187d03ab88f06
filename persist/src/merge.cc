#include "merge.h"

#include <algorithm>

namespace weir::persist::internal {

RunCursor::RunCursor(ThreadPool& pool, PartFetcher fetcher, std::vector<PartRef> parts,
                     size_t depth)
    : pool_(&pool),
      fetcher_(std::move(fetcher)),
      parts_(std::move(parts)),
      depth_(std::max<size_t>(1, depth)) {
  prefetch();
}

void RunCursor::prefetch() {
  while (fetching_.size() < depth_ && next_fetch_ < parts_.size()) {
    fetching_.push_back(
        pool_->submit([fetcher = fetcher_, ref = parts_[next_fetch_]] { return fetcher(ref); }));
    ++next_fetch_;
  }
}

bool RunCursor::advance() {
  if (!status_.ok()) {
    return false;
  }
  if (started_ && part_ != nullptr && index_ + 1 < part_->size()) {
    data_ = part_->data(++index_);
    // Many runs are read side by side, too many streams for the hardware prefetcher: load the
    // rows a few ahead, and the data of the next ones (whose rows are loaded by now).
    if (index_ + 8 < part_->size()) {
      __builtin_prefetch(part_->row_address(index_ + 8));
    }
    if (index_ + 2 < part_->size()) {
      __builtin_prefetch(part_->data(index_ + 2).data());
    }
    return true;
  }
  started_ = true;
  // Load parts until one has an update (parts are never empty, but do not rely on it).
  while (!fetching_.empty()) {
    absl::StatusOr<std::shared_ptr<const DecodedPart>> fetched = fetching_.front().get();
    fetching_.pop_front();
    if (!fetched.ok()) {
      status_ = fetched.status();
      part_ = nullptr;
      return false;
    }
    part_ = *std::move(fetched);
    index_ = 0;
    prefetch();
    if (part_->size() > 0) {
      data_ = part_->data(0);
      return true;
    }
  }
  part_ = nullptr;
  return false;
}

RunMerger::RunMerger(std::vector<RunCursor> runs) : runs_(std::move(runs)) {
  while (leaves_ < runs_.size()) {
    leaves_ *= 2;
  }
}

bool RunMerger::start() {
  started_ = true;
  exhausted_.assign(leaves_, 1);  // Padding leaves are exhausted runs.
  heads_.assign(leaves_, std::string_view());
  prefixes_.assign(leaves_, UINT64_MAX);
  for (uint32_t r = 0; r < runs_.size(); ++r) {
    if (runs_[r].advance()) {
      exhausted_[r] = 0;
      heads_[r] = runs_[r].data();
      prefixes_[r] = key_prefix(heads_[r]);
    } else if (!runs_[r].status().ok()) {
      status_ = runs_[r].status();
      return false;
    }
  }
  // Play the matches bottom-up: winners[node] is the winner below `node`.
  std::vector<uint32_t> winners(size_t{2} * leaves_);
  for (uint32_t leaf = 0; leaf < leaves_; ++leaf) {
    winners[leaves_ + leaf] = leaf;
  }
  tree_.assign(leaves_, 0);
  for (uint32_t node = leaves_ - 1; node >= 1; --node) {
    const uint32_t left = winners[2 * size_t{node}];
    const uint32_t right = winners[2 * size_t{node} + 1];
    const bool left_wins = !before(right, left);
    winners[node] = left_wins ? left : right;
    tree_[node] = left_wins ? right : left;
  }
  tree_[0] = winners[1];
  return true;
}

void RunMerger::replay(uint32_t run) {
  // Keys are random across runs, so which side wins a match cannot be predicted: the matches are
  // decided without branches (a mispredicted branch per level cost more than the rest of the
  // merge). Only equal prefixes, which are rare, take the branch into before().
  uint32_t winner = run;
  for (uint32_t node = (leaves_ + run) / 2; node >= 1; node /= 2) {
    const uint32_t other = tree_[node];
    const uint64_t other_prefix = prefixes_[other];
    const uint64_t winner_prefix = prefixes_[winner];
    bool swap = other_prefix < winner_prefix;
    if (other_prefix == winner_prefix) [[unlikely]] {
      swap = before(other, winner);
    }
    // Written as masks: GCC turns the plain conditional into a branch.
    const uint32_t flip = (other ^ winner) & (0u - static_cast<uint32_t>(swap));
    tree_[node] = other ^ flip;
    winner ^= flip;
  }
  tree_[0] = winner;
}

}  // namespace weir::persist::internal
