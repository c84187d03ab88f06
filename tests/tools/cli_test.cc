// The `weir` tool as people type it and mistype it (issue 23), through the real binary.
//
// The commands and their options come from the tool itself (`weir ... --help`, through every
// subcommand): every option needs its mistyped values in kBadValues below, so an option added
// without them fails EveryOptionHasCases. Each mistyped value must fail at once, before any
// work: a non-zero exit within seconds, an error naming the option, nothing created at a path it
// names and nothing changed in the persist location it was given.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/persist/client.h"

namespace weir::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct ToolRun {
  int exit_code = -1;  // -1: a signal ended it (or the limit did).
  bool timed_out = false;
  std::string out;  // stdout and stderr.
  Clock::duration elapsed{};
};

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) out += (out.empty() ? "" : " ") + ("'" + a + "'");
  return out;
}

// Runs `weir args...` with its output in a file; killed after `limit`.
ToolRun run_weir(const std::vector<std::string>& args,
                 std::chrono::seconds limit = std::chrono::seconds(30)) {
  char log[] = "/tmp/weir-cli-test-XXXXXX";
  const int fd = mkstemp(log);
  EXPECT_GE(fd, 0);
  std::vector<std::string> argv = {WEIR_TOOL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  ToolRun run;
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> c_argv;
    for (std::string& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() - start > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      run.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  run.elapsed = Clock::now() - start;
  run.exit_code = !run.timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  close(fd);
  std::ifstream in(log);
  run.out.assign(std::istreambuf_iterator<char>(in), {});
  unlink(log);
  return run;
}

// A command of the tool as its --help shows it.
struct Command {
  std::vector<std::string> path;         // {"persist", "cat"}; {} for weir itself.
  std::vector<std::string> options;      // The long name, or the short one if it has none.
  std::set<std::string> flags;           // The options that take no value.
  std::vector<std::string> positionals;  // "SHARD".
  std::vector<std::string> subcommands;  // Their names.
  std::string help;

  std::string name() const {
    std::string out;
    for (const std::string& p : path) out += (out.empty() ? "" : " ") + p;
    return out;
  }
  // "persist cat --as-of"; "--log-level" for an option of weir itself.
  std::string key(const std::string& option) const {
    return path.empty() ? option : name() + " " + option;
  }
};

// Parses CLI11's help: sections "Positionals:", "Options:" and "Subcommands:", one entry a line
// starting with two spaces ("  --scale UINT=1   snapshot size multiplier"); a description too
// long for its column continues on lines indented further.
Command parse_help(std::vector<std::string> path, const std::string& help) {
  Command command;
  command.path = std::move(path);
  command.help = help;
  std::istringstream lines(help);
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) {
      section.clear();
      continue;
    }
    if (line.back() == ':' && line[0] != ' ') {
      section = line;
      continue;
    }
    if (section.empty() || line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') {
      continue;
    }
    // The name and what follows it up to the description (two spaces or the line's end).
    const std::string entry = line.substr(2, line.find("  ", 2) - 2);
    std::istringstream words(entry);
    std::string names, type;
    words >> names >> type;
    if (section == "Subcommands:") {
      command.subcommands.push_back(names);
    } else if (section == "Positionals:") {
      command.positionals.push_back(names);
    } else if (section == "Options:") {
      std::string chosen;
      std::istringstream split(names);
      for (std::string name; std::getline(split, name, ',');) {
        if (chosen.empty() || name.rfind("--", 0) == 0) chosen = name;
      }
      if (chosen == "--help") continue;
      command.options.push_back(chosen);
      if (type.empty() || type == "Excludes:" || type == "Needs:") command.flags.insert(chosen);
    }
  }
  return command;
}

// Every command of the tool, weir itself first, from `--help` through its subcommands.
const std::vector<Command>& commands() {
  static const std::vector<Command>* all = [] {
    auto* out = new std::vector<Command>;
    std::vector<std::vector<std::string>> pending = {{}};
    while (!pending.empty()) {
      std::vector<std::string> path = pending.front();
      pending.erase(pending.begin());
      std::vector<std::string> args = path;
      args.emplace_back("--help");
      const ToolRun run = run_weir(args);
      EXPECT_EQ(run.exit_code, 0) << joined(args) << ": " << run.out;
      out->push_back(parse_help(path, run.out));
      for (const std::string& sub : out->back().subcommands) {
        std::vector<std::string> child = path;
        child.push_back(sub);
        pending.push_back(child);
      }
    }
    return out;
  }();
  return *all;
}

// The values each option must refuse, by "COMMAND OPTION" (a positional by its name; an option of
// weir itself by its own). An option
// gets them as its argument ("--scale" "-1"); a flag as "--quiet=VALUE"; a positional in its
// place. In a value, @ABSENT is a path where nothing is, @FILE a regular file, @EMPTY an empty
// directory, @STORE the persist location the read-only commands are given.
const std::vector<std::string> kUnsigned = {"-1",   "",    "seven", "1.5", "18446744073709551616",
                                            "0x10", "1e3", " 7"};
const std::vector<std::string> kWorkers = {"0", "-1", "100000", "", "two", "1.5"};
const std::vector<std::string> kFlag = {"bogus", "maybe"};
const std::vector<std::string> kShard = {""};
const std::vector<std::string> kReadPersist = {"", "@ABSENT", "@FILE", "@EMPTY"};
const std::vector<std::string> kReadBlob = {"", "file://@ABSENT", "file://", "ftp://x", "blob"};
const std::vector<std::string> kReadConsensus = {"",
                                                 "sqlite://@ABSENT/consensus.db",
                                                 "sqlite://@EMPTY/consensus.db",
                                                 "sqlite://",
                                                 "bogus://x",
                                                 "consensus.db"};

const std::vector<std::string> kObjectName = {"", "Bad", "weir.x", "a b"};

const std::vector<std::string> kPubSub = {"", "6876", ":6876", "host:0", "host:65536", "host:x"};

const std::map<std::string, std::vector<std::string>> kBadValues = [] {
  std::map<std::string, std::vector<std::string>> values = {
      {"--log-level", {"", "loud", "INFO", "warnings"}},
      {"ingest --source", {"", "loadgen:", "loadgen:nosuch", "kafka", "LOADGEN:auction"}},
      {"ingest --scale", {"-1", "", "seven", "1.5", "18446744073709551616", "1000001", "0x10"}},
      {"ingest --persist", {"", "@FILE"}},
      {"ingest --blob", {"", "file://", "ftp://x", "blob"}},
      {"ingest --consensus", {"", "sqlite://", "bogus://x", "consensus.db"}},
      {"ingest --workers", kWorkers},
      {"ingest --until", kUnsigned},
      {"ingest --rate", {"-5", "", "fast", "nan", "inf", "-inf", "1e400", "-0.5"}},
      {"ingest --mode", {"", "parallel", "Serial"}},
      {"ingest --tables", {"", ",", "nosuch", "bids,nosuch"}},
      {"ingest --snapshot-rows",
       {"", "bids", "bids=", "bids=-1", "bids=x", "=5", "nosuch=5", "bids=1.5"}},
      {"ingest --seed", kUnsigned},
      {"ingest --fault", {"", "bids", "bids@", "bids@-1", "@5", "nosuch@5", "bids@x"}},
      {"ingest --transient-fault", kUnsigned},
      {"ingest --add-table", {"", "nosuch"}},
      {"ingest --add-after", {"-1", "", "nan", "inf", "soon", "1e300", "1e10"}},
      {"ingest --compaction-window", kUnsigned},
      {"ingest --inject-faults", {"-0.1", "1.5", "2", "", "nan", "half", "inf"}},
      {"ingest --conn", {""}},
      {"ingest --publication", {""}},
      {"ingest --slot", {"", "Bad-Slot", "slot.with.dots", std::string(64, 's')}},
      {"ingest --name", {"", "has space", ".pg", "pg.", "a/b"}},
      {"ingest --until-lsn", {"", "5", "x/y", "1/2/3", "-1/0", "/"}},
      {"ingest --until-gtid", kUnsigned},
      {"ingest --server-id", {"-1", "", "x", "4294967296", "1.5"}},
      {"ingest --quiet", kFlag},
      {"persist --persist", kReadPersist},
      {"persist --blob", kReadBlob},
      {"persist --consensus", kReadConsensus},
      {"persist describe SHARD", kShard},
      {"persist cat SHARD", kShard},
      {"persist cat --as-of", kUnsigned},
      {"persist cat --reader-lease", {"0", "0.5", "", "soon", "nan", "inf", "-1", "86401"}},
      {"subscribe --persist", kReadPersist},
      {"subscribe --blob", kReadBlob},
      {"subscribe --consensus", kReadConsensus},
      {"subscribe SHARD", kShard},
      {"subscribe --as-of", kUnsigned},
      {"subscribe --no-snapshot", kFlag},
      {"subscribe --progress", kFlag},
      {"subscribe --until", kUnsigned},
      {"subscribe --reader-lease", {"0", "0.5", "", "soon", "nan", "inf", "-1", "86401"}},
      {"subscribe --workers", kWorkers},
      {"view --persist", kReadPersist},
      {"replica --persist", {"", "@FILE"}},
      {"replica --blob", {"", "file://", "ftp://x", "blob"}},
      {"replica --consensus", {"", "sqlite://", "bogus://x", "consensus.db"}},
      {"replica --workers", kWorkers},
      {"replica --poll-ms", {"0", "-1", "", "soon", "60001", "1.5"}},
      {"replica --processes", {"0", "1025", "", "x", "-1"}},
      {"replica --process", {"1", "-1", "", "x", "1024"}},
      {"replica --hostfile", {"", "@ABSENT"}},
      {"replica --pubsub", kPubSub},
      {"pubsub --listen", {"", "6876", ":6876", "host:", "host:65536", "host:x"}},
      {"ingest --pubsub", kPubSub},
      {"subscribe --pubsub", kPubSub},
      {"view --pubsub", kPubSub},
      {"ctl --pubsub", kPubSub},
      {"replica --http", {"", "x", "70000", "-1", "[::1", "::1:80", "host name:80"}},
      {"view --blob", kReadBlob},
      {"view --consensus", kReadConsensus},
      {"view NAME", {"", "max_bid", "nosuch"}},
      {"view --output", {"", "auction.bids", "auction.users"}},
      {"view --until", kUnsigned},
      {"view --workers", kWorkers},
      {"completion SHELL", {"", "zsh", "fish"}},
      {"ingest --http", {"", "x", "70000", "-1", "[::1", "::1:80", "host name:80"}},
      {"top --http", {"", "x", "70000", "-1", "[::1"}},
      {"top --interval", {"-1", "0", "", "x", "nan", "inf", "1e9"}},
      {"top --once", kFlag},
      {"ctl --persist", kReadPersist},
      {"ctl --blob", kReadBlob},
      {"ctl --consensus", kReadConsensus},
      {"ctl create source NAME", kObjectName},
      {"ctl create view NAME", kObjectName},
      {"ctl create view --view", {"", "nosuch", "max_bid"}},
      {"ctl create view --output", {"", "auction.bids", "weir.catalog"}},
      {"ctl create hold NAME", kObjectName},
      {"ctl create hold --shard", {""}},
      {"ctl create hold --reader", {""}},
      {"ctl drop NAME", kObjectName},
      {"ctl ls --version", kUnsigned},
      {"ctl status NAME", kObjectName},
      {"ctl status --history", kFlag},
      {"ctl history --from", kUnsigned},
      {"ctl hold advance NAME", kObjectName},
      {"ctl hold advance --to", kUnsigned},
  };
  // `weir ctl create source` takes the source flags of `weir ingest` (tools/weir/source_flags.h):
  // mistyped the same ways.
  for (const std::string flag : {"--source",
                                 "--scale",
                                 "--until",
                                 "--rate",
                                 "--mode",
                                 "--tables",
                                 "--snapshot-rows",
                                 "--seed",
                                 "--fault",
                                 "--transient-fault",
                                 "--add-table",
                                 "--add-after",
                                 "--compaction-window",
                                 "--conn",
                                 "--publication",
                                 "--slot",
                                 "--name",
                                 "--until-lsn",
                                 "--until-gtid",
                                 "--server-id"}) {
    values["ctl create source " + flag] = values.at("ingest " + flag);
  }
  return values;
}();

// How each command is run with every value valid, so that only the one under test is wrong:
// its positionals (for `persist`, the subcommand) and its options, in order. A flag's value is
// empty. The store flags go after the subcommand (where people type them too).
struct Valid {
  std::vector<std::string> positionals;
  std::vector<std::pair<std::string, std::string>> options;
};

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char base[] = "/tmp/weir-cli-XXXXXX";
    ASSERT_NE(mkdtemp(base), nullptr);
    base_ = new fs::path(base);
    fs::create_directories(*base_ / "store");
    fs::create_directories(*base_ / "empty");
    std::ofstream(*base_ / "file") << "not a directory\n";
    auto client =
        persist::PersistClient::open(persist::PersistLocation::in_directory(store())).value();
    // The auction shards the read-only commands and `weir view` read.
    for (const auto& [shard, row] : std::vector<std::pair<std::string, std::string>>{
             {"auction.bids", "1,1,1,10"}, {"auction.users", "1,ann,eu"}}) {
      persist::WriteHandle writer = client->open_writer(shard).value();
      const std::vector<persist::Update> rows = {{row, 0, 1}};
      ASSERT_TRUE(writer.compare_and_append(rows, persist::Frontier(0), persist::Frontier(2))
                      ->is_appended());
      (void)writer.expire();
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*base_);
    delete base_;
  }

  static std::string store() { return (*base_ / "store").string(); }
  static std::string absent() { return (*base_ / "absent").string(); }

  static std::string substitute(std::string value) {
    for (const auto& [name, path] :
         std::vector<std::pair<std::string, std::string>>{{"@ABSENT", absent()},
                                                          {"@FILE", (*base_ / "file").string()},
                                                          {"@EMPTY", (*base_ / "empty").string()},
                                                          {"@STORE", store()}}) {
      for (size_t at; (at = value.find(name)) != std::string::npos;)
        value.replace(at, name.size(), path);
    }
    return value;
  }

  static Valid valid(const std::string& command) {
    const std::vector<std::pair<std::string, std::string>> store_flags = {{"--persist", "@STORE"}};
    if (command == "ingest") {
      // A read-write command: its location is created, so it is one that must not be.
      return {{}, {{"--persist", "@ABSENT"}, {"--until", "0"}, {"--quiet", ""}}};
    }
    if (command == "persist") return {{"ls"}, store_flags};
    // Runs until stopped: every case here fails before it starts.
    if (command == "replica") return {{}, {{"--persist", "@ABSENT"}}};
    if (command == "pubsub") return {{}, {{"--listen", "127.0.0.1:1"}}};
    if (command == "persist ls") return {{}, {}};
    if (command == "persist describe" || command == "persist cat") return {{"auction.bids"}, {}};
    if (command == "subscribe") {
      auto options = store_flags;
      options.emplace_back("--until", "1");
      return {{"auction.bids"}, options};
    }
    if (command == "view") {
      auto options = store_flags;
      options.emplace_back("--until", "1");
      return {{"bids-per-auction"}, options};
    }
    if (command.empty()) return {{"completion", "bash"}, {}};  // Its options after a command.
    if (command == "completion") return {{"bash"}, {}};
    // Valid but for the server, which is not there: top fails, and only that error names no
    // option.
    if (command == "top") return {{}, {{"--http", "1"}, {"--once", ""}}};
    // `weir ctl` is given its subcommand, like `persist`; the commands run in the order
    // commands() finds them, so `ctl create` makes what `ctl drop` drops.
    if (command == "ctl") return {{"ls"}, store_flags};
    if (command == "ctl create") {
      return {{"hold", "first"}, {{"--shard", "auction.bids"}, {"--reader", "first"}}};
    }
    // `ctl hold` runs after `ctl create` made "first" and before `ctl drop` drops it; `ctl hold
    // advance` after `ctl create hold` made "audit" (auction.bids's upper is 2).
    if (command == "ctl hold") return {{"advance", "first"}, {{"--to", "1"}}};
    if (command == "ctl hold advance") return {{"audit"}, {{"--to", "2"}}};
    if (command == "ctl drop") return {{"first"}, {}};
    if (command == "ctl create source") return {{"src"}, {{"--source", "loadgen:auction"}}};
    if (command == "ctl create view") return {{"counts"}, {{"--view", "bids-per-auction"}}};
    if (command == "ctl create hold") {
      return {{"audit"}, {{"--shard", "auction.bids"}, {"--reader", "audit"}}};
    }
    return {};
  }

  // The arguments of `command` with every value valid but `option`'s, which is `value` (no
  // option: every value valid).
  static std::vector<std::string> arguments(const Command& command, const std::string& option,
                                            const std::string& value) {
    Valid v = valid(command.name());
    const bool positional = std::find(command.positionals.begin(), command.positionals.end(),
                                      option) != command.positionals.end();
    // The store: --blob needs --consensus and both exclude --persist.
    const bool read_only = command.name() != "ingest";
    const std::string location = read_only ? "@STORE" : "@ABSENT";
    auto drop = [&v](const std::string& name) {
      std::erase_if(v.options, [&name](const auto& o) { return o.first == name; });
    };
    drop(option);
    if (option == "--blob") {
      drop("--persist");
      v.options.emplace_back("--consensus", "sqlite://" + location + "/consensus.db");
    } else if (option == "--consensus") {
      drop("--persist");
      v.options.emplace_back("--blob", "file://" + location + "/blob");
    }
    std::vector<std::string> args = command.path;
    // `persist` and `ctl` are given their subcommand; the store flags follow it.
    const bool store_command = command.name() == "persist" || command.name() == "ctl";
    if (store_command) args.push_back(v.positionals[0]);
    if (command.path.size() >= 2 && (command.path[0] == "persist" || command.path[0] == "ctl")) {
      args.insert(args.end(), {"--persist", "@STORE"});
    }
    if (positional) {
      // One positional everywhere: replaced by the value.
      args.push_back(value);
    } else if (!store_command) {
      args.insert(args.end(), v.positionals.begin(), v.positionals.end());
    }
    for (const auto& [name, arg] : v.options) {
      args.push_back(name);
      if (!arg.empty()) args.push_back(arg);
    }
    if (!positional && !option.empty()) {
      if (command.flags.contains(option)) {
        args.push_back(option + "=" + value);
      } else {
        args.push_back(option);
        args.push_back(value);
      }
    }
    for (std::string& a : args) a = substitute(a);
    return args;
  }

  // Every file under the base directory with its size and modification time.
  static std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing() {
    std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
    for (const auto& entry : fs::recursive_directory_iterator(*base_)) {
      out[entry.path().string()] = {entry.is_regular_file() ? entry.file_size() : 0,
                                    entry.last_write_time()};
    }
    return out;
  }

  static fs::path* base_;
};

fs::path* CliTest::base_ = nullptr;

TEST_F(CliTest, FindsEveryCommand) {
  std::set<std::string> names;
  for (const Command& c : commands()) names.insert(c.name());
  for (const char* expected :
       {"ingest", "persist", "persist ls", "persist describe", "persist cat", "subscribe", "view",
        "completion", "ctl", "ctl create", "ctl create source", "ctl create view",
        "ctl create hold", "ctl drop", "ctl ls", "ctl status", "ctl history", "ctl hold",
        "ctl hold advance"}) {
    EXPECT_TRUE(names.contains(expected)) << expected;
  }
  for (const Command& c : commands()) {
    if (c.name() == "ingest") {
      EXPECT_TRUE(c.flags.contains("--quiet"));
      EXPECT_FALSE(c.flags.contains("--scale"));
    }
  }
}

// An option without mistyped values here fails, and so do values for an option the tool no longer
// has.
TEST_F(CliTest, EveryOptionHasCases) {
  std::set<std::string> seen;
  for (const Command& c : commands()) {
    std::vector<std::string> all = c.options;
    all.insert(all.end(), c.positionals.begin(), c.positionals.end());
    for (const std::string& option : all) {
      const std::string key = c.key(option);
      seen.insert(key);
      EXPECT_TRUE(kBadValues.contains(key))
          << "weir " << key << " has no mistyped values in kBadValues (tests/tools/cli_test.cc)";
    }
  }
  for (const auto& [key, values] : kBadValues) {
    EXPECT_TRUE(seen.contains(key)) << "kBadValues has " << key << ", which the tool does not";
  }
}

// Each mistyped value: a non-zero exit at once, an error naming the option, nothing created.
TEST_F(CliTest, EveryMistypedValueIsAClearErrorBeforeAnyWork) {
  auto before = listing();
  for (const Command& c : commands()) {
    std::vector<std::string> all = c.options;
    all.insert(all.end(), c.positionals.begin(), c.positionals.end());
    for (const std::string& option : all) {
      const auto cases = kBadValues.find(c.key(option));
      if (cases == kBadValues.end()) continue;  // EveryOptionHasCases says so.
      for (const std::string& value : cases->second) {
        const std::vector<std::string> args = arguments(c, option, value);
        SCOPED_TRACE("weir " + joined(args));
        const ToolRun run = run_weir(args, std::chrono::seconds(20));
        EXPECT_FALSE(run.timed_out) << "still running after 20 s";
        EXPECT_GT(run.exit_code, 0) << run.out;
        EXPECT_LT(run.elapsed, std::chrono::seconds(5)) << "work was done before the error";
        EXPECT_NE(run.out.find(option), std::string::npos)
            << "the error does not name " << option << ": " << run.out;
        EXPECT_FALSE(fs::exists(absent())) << "created " << absent();
        fs::remove_all(absent());
        const auto after = listing();
        for (const auto& [path, stat] : after) {
          const auto was = before.find(path);
          EXPECT_TRUE(was != before.end() && was->second == stat) << "created or changed " << path;
        }
        for (const auto& [path, stat] : before) {
          EXPECT_TRUE(after.contains(path)) << "removed " << path;
        }
        before = after;  // Each mistake reported once.
      }
    }
  }
}

// The values above are mistyped only where the test says: with valid ones the commands work.
TEST_F(CliTest, TheValidArgumentsWork) {
  for (const Command& c : commands()) {
    // top needs a running ingest --http; a replica runs until stopped (tests/control runs it).
    if (c.path.empty() || c.name() == "top" || c.name() == "replica" || c.name() == "pubsub")
      continue;
    const std::vector<std::string> args = arguments(c, "", "");
    SCOPED_TRACE("weir " + joined(args));
    const ToolRun run = run_weir(args);
    EXPECT_EQ(run.exit_code, 0) << run.out;
  }
  EXPECT_TRUE(fs::exists(absent())) << "ingest creates its persist location";
  fs::remove_all(absent());
}

// An option of a parent command after its subcommand, where people type it.
TEST_F(CliTest, ParentOptionsAreAcceptedAfterTheSubcommand) {
  ToolRun run = run_weir({"persist", "cat", "auction.users", "--persist", store()});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "1,ann,eu\t1\t1\n");
  run = run_weir({"persist", "ls", "--persist", store()});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out.find("auction.bids\nauction.users\n"), 0u) << run.out;
  run = run_weir({"persist", "describe", "--blob", "file://" + store() + "/blob", "auction.bids",
                  "--consensus", "sqlite://" + store() + "/consensus.db"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("upper           [2]"), std::string::npos) << run.out;
  // And still before it.
  run = run_weir({"persist", "--persist", store(), "cat", "auction.users", "--as-of", "1"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, "1,ann,eu\t1\t1\n");
}

TEST_F(CliTest, EveryCommandsHelpHasAnExample) {
  for (const Command& c : commands()) {
    const std::string example = "  weir" + (c.path.empty() ? "" : " " + c.name());
    EXPECT_NE(c.help.find("Example"), std::string::npos) << "weir " << c.name() << ":\n" << c.help;
    EXPECT_NE(c.help.find(example), std::string::npos)
        << "no \"" << example << "\" in weir " << c.name() << ":\n"
        << c.help;
  }
}

// What bash offers for `words` (the last is being typed) with the script `weir completion bash`
// prints.
std::vector<std::string> complete(const std::string& script,
                                  const std::vector<std::string>& words) {
  std::string array;
  for (const std::string& w : words) array += " '" + w + "'";
  const std::string program = script + "\nCOMP_WORDS=(weir" + array +
                              ")\nCOMP_CWORD=" + std::to_string(words.size()) +
                              "\nCOMP_LINE=\"${COMP_WORDS[*]}\"\nCOMP_POINT=${#COMP_LINE}\n"
                              "_weir weir \"${COMP_WORDS[COMP_CWORD]}\" "
                              "\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
                              "printf '%s\\n' \"${COMPREPLY[@]}\"\n";
  char path[] = "/tmp/weir-completion-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, program.data(), program.size()), static_cast<ssize_t>(program.size()));
  close(fd);
  FILE* pipe = popen(("bash --norc --noprofile " + std::string(path)).c_str(), "r");
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  unlink(path);
  std::vector<std::string> offered;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) offered.push_back(line);
  }
  return offered;
}

bool offers(const std::vector<std::string>& offered, const std::string& word) {
  return std::find(offered.begin(), offered.end(), word) != offered.end();
}

TEST_F(CliTest, BashCompletionOffersEveryCommandAndOption) {
  const ToolRun run = run_weir({"completion", "bash"});
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const std::string script = run.out;
  for (const Command& c : commands()) {
    std::vector<std::string> words = c.path;
    const Valid v = valid(c.name());
    // Its positionals, but not the subcommands that `weir`, `persist` and `ctl` are given.
    if (c.subcommands.empty()) {
      words.insert(words.end(), v.positionals.begin(), v.positionals.end());
    }
    words.emplace_back("-");
    const std::vector<std::string> offered = complete(script, words);
    for (const std::string& option : c.options) {
      EXPECT_TRUE(offers(offered, option)) << "weir " << joined(words) << " offers no " << option;
    }
    words.back() = "";
    const std::vector<std::string> next = complete(script, words);
    for (const std::string& sub : c.subcommands) {
      EXPECT_TRUE(offers(next, sub)) << "weir " << joined(words) << " offers no " << sub;
    }
  }
  // Words being typed, parent options after subcommands, and the values an option takes.
  EXPECT_EQ(complete(script, {"pers"}), std::vector<std::string>{"persist"});
  EXPECT_EQ(complete(script, {"persist", "--persist", "/tmp", "c"}),
            std::vector<std::string>{"cat"});
  const std::vector<std::string> cat = complete(script, {"persist", "cat", "x", "--"});
  EXPECT_TRUE(offers(cat, "--as-of") && offers(cat, "--persist")) << joined(cat);
  EXPECT_EQ(complete(script, {"ingest", "--quiet", "--mo"}), std::vector<std::string>{"--mode"})
      << "a flag takes no value";
  // Bash splits words at colons: "loadgen:a" comes as "loadgen" ":" "a".
  EXPECT_EQ(complete(script, {"ingest", "--source", "loadgen", ":", "a"}),
            std::vector<std::string>{"auction"});
  EXPECT_EQ(complete(script, {"ingest", "--source", "loadgen", ":"}),
            (std::vector<std::string>{"counter", "auction"}));
  EXPECT_EQ(complete(script, {"ingest", "--source", "loadgen", ":", "auction", "--mo"}),
            std::vector<std::string>{"--mode"});
  EXPECT_EQ(complete(script, {"ingest", "--mode", ""}),
            (std::vector<std::string>{"concurrent", "serial"}));
  EXPECT_EQ(complete(script, {"view", "--persist", "/tmp", "m"}),
            std::vector<std::string>{"max-bid"});
  EXPECT_TRUE(offers(complete(script, {"ingest", "--persist", (*base_ / "st").string()}), store()));
}

}  // namespace
}  // namespace weir::tools
