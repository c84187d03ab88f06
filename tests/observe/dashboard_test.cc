// The dashboard (observe/web/dashboard.html) in a real browser: headless Chromium loads / from a
// running `weir ingest --http` twice, a few seconds apart; the DOM must show every operator of the
// newest dataflow as a graph node and a row for every export, with uppers that moved between the
// loads. A screenshot is kept under the build tree (WEIR_DASHBOARD_SCREENSHOT) for a person to look
// at. Chromium missing is a failure, not a skip: scripts/setup.sh installs it.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http_get.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace weir::observe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::http_get;
using Clock = std::chrono::steady_clock;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts `args` in a process group of its own (so a browser's helpers go with it) with stdout and
// stderr in files and `env` added to the environment; the child dies with the test (PDEATHSIG),
// even when ctest's timeout kills the test.
pid_t spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err,
            const std::map<std::string, std::string>& env = {}) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The test died before the prctl.
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` up to `timeout`; past it, `first` to the group, then SIGKILL after a grace
// period. The exit status, or nullopt if it had to be killed.
std::optional<int> wait_or_kill(pid_t pid, std::chrono::seconds timeout, int first = SIGKILL) {
  int status = 0;
  const auto deadline = Clock::now() + timeout;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(-pid, first);
      const auto grace = Clock::now() + std::chrono::seconds(10);
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (Clock::now() > grace) {
          kill(-pid, SIGKILL);
          waitpid(pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      kill(-pid, SIGKILL);  // Whatever of the group is left.
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The browser: $WEIR_CHROMIUM, else chromium or chromium-browser on PATH.
std::optional<std::string> find_chromium() {
  if (const char* given = std::getenv("WEIR_CHROMIUM"); given != nullptr && *given != '\0') {
    return given;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const fs::path candidate = fs::path(dir) / name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
  }
  return std::nullopt;
}

// The text of the element that follows `marker` (an attribute fragment such as `lag-seconds"`),
// up to the next tag; searched within [from, to).
std::optional<std::string> text_after(const std::string& html, const std::string& marker,
                                      size_t from = 0, size_t to = std::string::npos) {
  const size_t at = html.find(marker, from);
  if (at == std::string::npos || at >= to) return std::nullopt;
  const size_t open = html.find('>', at);
  const size_t close = html.find('<', open);
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  return html.substr(open + 1, close - open - 1);
}

struct ExportRow {
  std::string upper, lag_seconds;
};

struct Page {
  std::string html;
  std::multiset<std::string> op_nodes;       // data-name of every g.op-node.
  std::map<std::string, ExportRow> exports;  // By data-table.
};

std::string unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
      s.replace(at, from.size(), to);
    }
  }
  return s;
}

Page parse_page(std::string html) {
  // The page's script writes the same markup as templates: only the DOM outside it counts.
  for (size_t at = html.find("<script"); at != std::string::npos; at = html.find("<script", at)) {
    const size_t end = html.find("</script>", at);
    html.erase(at, end == std::string::npos ? std::string::npos : end + 9 - at);
  }
  Page page;
  const std::regex node("<g class=\"op-node[^\"]*\" data-name=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), node); it != std::sregex_iterator();
       ++it) {
    page.op_nodes.insert(unescape((*it)[1]));
  }
  const std::string row = "<tr class=\"export-row\" data-table=\"";
  for (size_t at = html.find(row); at != std::string::npos; at = html.find(row, at + 1)) {
    const size_t name_end = html.find('"', at + row.size());
    const size_t end = html.find("</tr>", at);
    const std::string table = unescape(html.substr(at + row.size(), name_end - at - row.size()));
    page.exports[table] = ExportRow{text_after(html, "upper\"", at, end).value_or("?"),
                                    text_after(html, "lag-seconds\"", at, end).value_or("?")};
  }
  page.html = std::move(html);
  return page;
}

uint64_t digits(const std::string& text) {
  std::string d;
  for (const char c : text) {
    if (c >= '0' && c <= '9') d.push_back(c);
  }
  return d.empty() ? 0 : std::stoull(d);
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("weir_dashboard_" + std::to_string(getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "home");
  }
  void TearDown() override {
    stop_ingest();
    fs::remove_all(base_);
  }

  // `weir ingest` with no --until: it runs until stopped.
  void start_ingest() {
    pid_ = spawn({WEIR_TOOL_PATH, "ingest", "--source", "loadgen:auction", "--scale", "1",
                  "--persist", (base_ / "persist").string(), "-w", "2", "--rate", "2000", "--http",
                  "127.0.0.1:0", "--quiet"},
                 base_ / "ingest.out", base_ / "ingest.err");
    const std::regex url("serving http://127\\.0\\.0\\.1:([0-9]+)/");
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      std::smatch m;
      const std::string err = read_text(base_ / "ingest.err");
      if (std::regex_search(err, m, url)) {
        port_ = std::stoi(m[1]);
        return;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "weir ingest exited; stderr: " << err;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "weir ingest printed no address; stderr: " << read_text(base_ / "ingest.err");
  }
  void stop_ingest() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    wait_or_kill(pid_, std::chrono::seconds(20), SIGKILL);
    pid_ = -1;
  }
  std::optional<json> get_json(const std::string& path) {
    const auto r = http_get(port_, path);
    if (r.status != 200) return std::nullopt;
    auto parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return std::nullopt;
    return parsed;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }

  // One headless load of the dashboard with `extra` flags; its stdout (the DOM with --dump-dom).
  std::string run_chromium(const std::string& chromium, const std::vector<std::string>& extra) {
    const std::string run = std::to_string(++runs_);
    std::vector<std::string> args = {chromium,
                                     "--headless=new",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-dev-shm-usage",
                                     "--no-first-run",
                                     "--disable-extensions",
                                     "--hide-scrollbars",
                                     "--user-data-dir=" + (base_ / ("profile" + run)).string(),
                                     "--virtual-time-budget=4000"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(url());
    const fs::path out = base_ / ("chromium" + run + ".out"),
                   err = base_ / ("chromium" + run + ".err");
    const pid_t pid = spawn(args, out, err,
                            {{"HOME", (base_ / "home").string()},
                             {"XDG_CONFIG_HOME", (base_ / "home" / ".config").string()},
                             {"XDG_CACHE_HOME", (base_ / "home" / ".cache").string()}});
    const auto status = wait_or_kill(pid, std::chrono::seconds(60));
    EXPECT_TRUE(status.has_value()) << "chromium ran past 60 s; stderr: " << read_text(err);
    EXPECT_EQ(status.value_or(0), 0) << "chromium failed; stderr: " << read_text(err);
    return read_text(out);
  }

  fs::path base_;
  pid_t pid_ = -1;
  int port_ = 0;
  int runs_ = 0;
};

TEST_F(DashboardTest, ShowsTheGraphAndExportsAndUpdatesLive) {
  const std::optional<std::string> chromium = find_chromium();
  ASSERT_TRUE(chromium.has_value())
      << "the dashboard test needs headless Chromium and found none on PATH (nor $WEIR_CHROMIUM): "
         "install it with scripts/setup.sh (Debian package `chromium`)";

  ASSERT_NO_FATAL_FAILURE(start_ingest());
  // Serving, with its exports listed and the newest dataflow's graph answered.
  json status, graph;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto s = get_json("/status");
    auto g = get_json("/graph");
    if (s && g && !(*s)["exports"].empty() && !(*g)["dataflows"].empty() &&
        !(*g)["dataflows"].back()["operators"].empty()) {
      status = *std::move(s);
      graph = *std::move(g);
      break;
    }
    ASSERT_LT(Clock::now(), deadline) << "no /status with exports and /graph with operators; "
                                      << "stderr: " << read_text(base_ / "ingest.err");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::set<std::string> tables;
  for (const auto& e : status["exports"]) tables.insert(e["table"].get<std::string>());
  // The page shows the dataflow with the largest index.
  const json* newest = nullptr;
  for (const auto& d : graph["dataflows"]) {
    if (newest == nullptr || d["index"].get<size_t>() > (*newest)["index"].get<size_t>())
      newest = &d;
  }
  std::multiset<std::string> operators;
  for (const auto& op : (*newest)["operators"]) operators.insert(op["name"].get<std::string>());

  const Page first = parse_page(run_chromium(*chromium, {"--dump-dom"}));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const Page second = parse_page(run_chromium(*chromium, {"--dump-dom"}));

  for (const Page* page : {&first, &second}) {
    SCOPED_TRACE(page == &first ? "first load" : "second load");
    ASSERT_FALSE(page->html.empty()) << "chromium dumped no DOM";
    EXPECT_GE(page->op_nodes.size(), 3u) << page->html;
    EXPECT_EQ(page->op_nodes, operators) << "the graph's nodes are not the newest dataflow's "
                                            "operators";
    for (const auto& table : tables) {
      EXPECT_TRUE(page->exports.contains(table)) << "no export row for " << table;
    }
    EXPECT_EQ(page->exports.size(), tables.size());
    const auto time = text_after(page->html, "id=\"status-time\"");
    EXPECT_TRUE(time.has_value() && *time != "never" && !time->empty())
        << "no /status poll answered: " << time.value_or("(no #status-time)");
    EXPECT_NE(page->html.find("id=\"error-banner\" role=\"alert\" hidden"), std::string::npos)
        << "the error banner shows: " << text_after(page->html, "id=\"error-banner\"").value_or("");
  }
  // Live: each export's upper moved on between the loads (2000 changes/s upstream), and its lag
  // is a number of seconds.
  for (const auto& table : tables) {
    const ExportRow a = first.exports.count(table) ? first.exports.at(table) : ExportRow{};
    const ExportRow b = second.exports.count(table) ? second.exports.at(table) : ExportRow{};
    SCOPED_TRACE(table + ": upper " + a.upper + " then " + b.upper + ", lag " + a.lag_seconds +
                 " then " + b.lag_seconds);
    EXPECT_GT(digits(b.upper), digits(a.upper));
    EXPECT_TRUE(std::regex_search(b.lag_seconds, std::regex("[0-9]+(\\.[0-9]+)? (ms|s)|<1 ms")));
  }

  // The screenshot a person looks at (a CI artifact).
  const fs::path shot = WEIR_DASHBOARD_SCREENSHOT;
  fs::create_directories(shot.parent_path());
  fs::remove(shot);
  run_chromium(*chromium, {"--screenshot=" + shot.string(), "--window-size=1400,1000"});
  ASSERT_TRUE(fs::exists(shot)) << "no screenshot at " << shot;
  const std::string png = read_text(shot);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 10u * 1024) << "a near-empty screenshot: " << shot;
  std::cout << "dashboard screenshot: " << shot << "\n";
}

}  // namespace
}  // namespace weir::observe
