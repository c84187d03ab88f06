// wordcount FILE [-w W]: prints one line "word count" for every distinct word of FILE, sorted.
//
// A word is a maximal run of letters, digits and apostrophes, lowercased. Worker w reads the
// lines with index i where i % W == w; words are exchanged by hash and counted per word.
//
// As a cluster (`weir-launch -n N -w W wordcount FILE`), W is the cluster's N·W workers; the
// counts are gathered to worker 0, so process 0 prints the whole output, the same as -w 1's.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

namespace {

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  for (char c : line) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '\'') {
      word.push_back(static_cast<char>(std::tolower(u)));
    } else if (!word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

}  // namespace

int main(int argc, char** argv) {
  auto config = weir::Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "wordcount: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: wordcount FILE [-w W]\n");
    return 2;
  }
  const std::string path = argv[1];
  std::ifstream probe_file(path);
  if (!probe_file) {
    std::fprintf(stderr, "wordcount: cannot open '%s'\n", path.c_str());
    return 1;
  }

  using Count = std::pair<std::string, uint64_t>;
  auto results = weir::cluster::execute(*config, [&](weir::Worker& worker) {
    std::vector<Count> counts;
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, lines] = weir::new_input<std::string>(scope);
      lines | weir::flat_map(words_of) | weir::map([](std::string w) {
        return std::pair<std::string, uint64_t>{std::move(w), 1};
      }) |
          weir::aggregate<uint64_t>(
              [](const std::string&, uint64_t one, uint64_t& total) { total += one; },
              [](std::string word, uint64_t total) {
                return Count{std::move(word), total};
              },
              [](const std::string& word) { return std::hash<std::string>{}(word); }) |
          weir::inspect([&counts](const Count& c) { counts.push_back(c); });
      return std::move(handle);
    });
    std::ifstream file(path);
    std::string line;
    for (size_t i = 0; std::getline(file, line); ++i) {
      if (i % worker.peers() == worker.index()) input.send(line);
    }
    input.close();
    while (worker.step_or_park(std::nullopt)) {
    }
    return weir::cluster::gather(worker, std::move(counts));
  });
  if (!results.ok()) {
    std::fprintf(stderr, "wordcount: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }
  std::vector<Count> all;
  for (auto& per_worker : *results) all.insert(all.end(), per_worker.begin(), per_worker.end());
  std::sort(all.begin(), all.end());
  for (const auto& [word, n] : all) {
    std::printf("%s %llu\n", word.c_str(), static_cast<unsigned long long>(n));
  }
  return 0;
}
