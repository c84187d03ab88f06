// Cluster integration tests: real processes linked over loopback.
//
// - wordcount through weir-launch with -n 2 -w 2 and -n 3 -w 1 prints what -w 1 prints;
// - the random-dataflow property test runs across 2 processes;
// - killing (or stopping) one process of 3 makes the other two exit non-zero within the
//   heartbeat timeout plus 2 s, naming the lost process; a failing worker fails every process;
// - a Hello of another cluster or an older incarnation is refused;
// - mutual TLS with certificates made here by openssl: per-process certificates link and the
//   job's answer is right; a peer whose certificate is not signed by the CA, or names another
//   process index or none, is refused; a hostfile off loopback needs TLS or --insecure-links;
// - garbage, truncated frames and frames without a Hello sent to a process's port leave it
//   running; malformed frames from an established peer close the link with an error;
// - weir-launch returns the first failure's exit code and stops the other processes; it stops
//   each process with its process group (grandchildren included), exits once its processes are
//   reaped, works when started with SIGCHLD ignored, passes SIGINT/SIGTERM/SIGHUP on as they
//   came, and starts the cluster again when a port it picked is taken before its process listens;
//   it gives its processes a fresh cluster secret in the environment (keeping one the user gave),
//   so that a process without it is refused, and replaces {p} in --tls-cert and --tls-key with
//   each process's index;
// - weir-launch --restart starts the cluster again after a failure, on a growing backoff, with
//   $WEIR_INCARNATION one higher each time (from 1, or from the user's), logging each restart as a
//   JSON line; --max-restarts ends it with the last failure's code; a signal during the backoff or
//   the run stops it without a restart; without --restart the incarnation is left alone;
// - flow control keeps a 2-process exchange with one slow worker within its memory bound.
//
// Every wait has a deadline that fails the test (and kills what is left) instead of hanging.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "frame.h"
#include "testing/ports.h"
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/sanitizers.h"
#include "weir/worker/config.h"

namespace weir {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A process started by a test: its output is collected by a thread; killed when destroyed.
class Process {
 public:
  // `ignored` signals are set to SIG_IGN in the process (it inherits that through exec).
  explicit Process(std::vector<std::string> args,
                   const std::vector<std::pair<std::string, std::string>>& env = {},
                   const std::vector<int>& ignored = {}) {
    int out[2], err[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
      for (int sig : ignored) ::signal(sig, SIG_IGN);
      std::vector<char*> argv;
      argv.reserve(args.size() + 1);
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::fprintf(stderr, "cannot run %s\n", argv[0]);
      _exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    reader_ = std::thread([this, o = out[0], e = err[0]] { read(o, e); });
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    drain();
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // The exit code (128 + signal for a signal) once the process ends, or nullopt at `deadline`.
  std::optional<int> wait_until(Clock::time_point deadline) {
    while (!status_) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return status_;
  }
  std::optional<int> wait_for(Clock::duration d) { return wait_until(Clock::now() + d); }

  // True once stdout contains `needle` (false at the deadline).
  bool wait_for_output(const std::string& needle, Clock::duration d) {
    const auto deadline = Clock::now() + d;
    while (Clock::now() < deadline) {
      if (out().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }
  // True once stderr contains `needle` (false at the deadline).
  bool wait_for_error_output(const std::string& needle, Clock::duration d) {
    const auto deadline = Clock::now() + d;
    while (Clock::now() < deadline) {
      if (err().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }

  // What the process printed so far (all of it once wait_* reported its end and output closed).
  std::string out() {
    std::lock_guard lock(mu_);
    return out_;
  }
  std::string err() {
    std::lock_guard lock(mu_);
    return err_;
  }
  // Waits for the output to be complete (the pipes closed) after the process ended.
  void drain() {
    if (reader_.joinable()) reader_.join();
  }

 private:
  void read(int out, int err) {
    pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    int open = 2;
    while (open > 0) {
      if (::poll(fds, 2, 100) <= 0) continue;
      for (auto& p : fds) {
        if (p.fd < 0 || p.revents == 0) continue;
        char buffer[4096];
        const ssize_t n = ::read(p.fd, buffer, sizeof(buffer));
        if (n <= 0) {
          ::close(p.fd);
          p.fd = -1;
          --open;
          continue;
        }
        std::lock_guard lock(mu_);
        (p.fd == fds[0].fd ? out_ : err_).append(buffer, static_cast<size_t>(n));
      }
    }
  }

  pid_t pid_ = -1;
  std::optional<int> status_;
  std::thread reader_;
  std::mutex mu_;
  std::string out_, err_;  // Guarded by mu_.
};

using weir::testing::free_ports;

// A temporary directory with a hostfile for `processes` loopback processes.
class Cluster {
 public:
  explicit Cluster(size_t processes) : processes_(processes) {
    std::string pattern = (std::filesystem::temp_directory_path() / "weir-cluster-test.XXXXXX");
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ports_ = free_ports(processes);
    std::ofstream out(hostfile());
    for (int port : ports_) out << "127.0.0.1:" << port << "\n";
  }
  ~Cluster() { std::filesystem::remove_all(dir_); }

  std::string hostfile() const { return (dir_ / "hostfile").string(); }
  const std::filesystem::path& dir() const { return dir_; }
  int port(size_t process) const { return ports_[process]; }
  std::string address(size_t process) const {
    return "127.0.0.1:" + std::to_string(ports_[process]);
  }

  // weir_cluster_child MODE ARGS as process `p` of this cluster, with `extra` flags.
  std::unique_ptr<Process> start(size_t p, std::vector<std::string> mode,
                                 std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {WEIR_CLUSTER_CHILD};
    args.insert(args.end(), mode.begin(), mode.end());
    for (const std::string& flag :
         {std::string("-n"), std::to_string(processes_), std::string("-p"), std::to_string(p),
          std::string("-h"), hostfile()}) {
      args.push_back(flag);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(args);
  }

 private:
  size_t processes_;
  std::filesystem::path dir_;
  std::vector<int> ports_;
};

bool contains(const std::string& text, const std::string& words) {
  return text.find(words) != std::string::npos;
}

// Output without weir-launch's "[I] " prefixes.
std::string strip_prefixes(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.size() > 2 && line[0] == '[') line = line.substr(line.find("] ") + 2);
    out += line + "\n";
  }
  return out;
}

// ---- Results equal one process's ----

TEST(ClusterTest, WordcountMatchesOneProcess) {
  if (std::string(WEIR_WORDCOUNT).empty()) GTEST_SKIP() << "examples are not built";
  Process alone({WEIR_WORDCOUNT, WEIR_SONNETS, "-w", "1"});
  ASSERT_EQ(alone.wait_for(seconds(60)), 0) << alone.err();
  alone.drain();
  const std::string expected = alone.out();
  ASSERT_GT(expected.size(), 100u);
  for (auto [n, w] : {std::pair{"2", "2"}, std::pair{"3", "1"}}) {
    Process cluster({WEIR_LAUNCH, "-n", n, "-w", w, "--", WEIR_WORDCOUNT, WEIR_SONNETS});
    ASSERT_EQ(cluster.wait_for(seconds(60)), 0) << cluster.err();
    cluster.drain();
    EXPECT_EQ(strip_prefixes(cluster.out()), expected) << "-n " << n << " -w " << w;
  }
}

TEST(ClusterTest, PropertyTestAcrossTwoProcesses) {
  Process cluster(
      {WEIR_LAUNCH, "-n", "2", "-w", "2", "--", WEIR_CLUSTER_CHILD, "property", "1", "60"});
  ASSERT_EQ(cluster.wait_for(seconds(120)), 0) << cluster.err() << cluster.out();
  cluster.drain();
  EXPECT_TRUE(contains(cluster.out(), "[0] property: ok")) << cluster.out();
}

// ---- Fail-stop ----

// Starts `n` spinning processes and waits until every one has run a round.
std::vector<std::unique_ptr<Process>> start_spinning(const Cluster& cluster, size_t n,
                                                     const std::vector<std::string>& flags) {
  std::vector<std::unique_ptr<Process>> processes;
  for (size_t p = 0; p < n; ++p) processes.push_back(cluster.start(p, {"spin", "120"}, flags));
  for (auto& p : processes) {
    EXPECT_TRUE(p->wait_for_output("running", seconds(60))) << p->err();
  }
  return processes;
}

// Every process but `lost` exits non-zero by `deadline`, naming a lost peer. Fail-stop cascades:
// the survivor that notices first exits, and another may see that link break before its own link
// to `lost` (both break at once), so it names the survivor instead; at least one names `lost`.
void expect_survivors_fail(const std::vector<std::unique_ptr<Process>>& processes, size_t lost,
                           Clock::time_point deadline) {
  const std::string lost_name = "process " + std::to_string(lost);
  size_t named_lost = 0;
  for (size_t p = 0; p < processes.size(); ++p) {
    if (p == lost) continue;
    auto code = processes[p]->wait_until(deadline);
    ASSERT_TRUE(code.has_value()) << "process " << p
                                  << " still runs after the heartbeat timeout + 2 s";
    EXPECT_NE(*code, 0);
    processes[p]->drain();
    const std::string& err = processes[p]->err();
    bool named_a_survivor = false;
    for (size_t q = 0; q < processes.size(); ++q) {
      if (q != p && q != lost && contains(err, "process " + std::to_string(q)))
        named_a_survivor = true;
    }
    EXPECT_TRUE(contains(err, lost_name) || named_a_survivor) << err;
    if (contains(err, lost_name)) ++named_lost;
  }
  EXPECT_GE(named_lost, 1u);
}

TEST(ClusterTest, KillingOneOfThreeFailsTheOthersNamingIt) {
  constexpr int kHeartbeatMs = 2000;
  Cluster cluster(3);
  auto processes =
      start_spinning(cluster, 3, {"--heartbeat-timeout-ms", std::to_string(kHeartbeatMs)});
  processes[2]->signal(SIGKILL);
  const auto deadline = Clock::now() + milliseconds(kHeartbeatMs + 2000);
  expect_survivors_fail(processes, 2, deadline);
}

TEST(ClusterTest, StoppedProcessIsFoundByHeartbeats) {
  constexpr int kHeartbeatMs = 1500;
  Cluster cluster(3);
  auto processes =
      start_spinning(cluster, 3, {"--heartbeat-timeout-ms", std::to_string(kHeartbeatMs)});
  processes[1]->signal(SIGSTOP);  // Its sockets stay open: only the silence tells.
  const auto deadline = Clock::now() + milliseconds(kHeartbeatMs + 2000);
  expect_survivors_fail(processes, 1, deadline);
  processes[1]->signal(SIGKILL);
}

// Under full load (issue 14, item 6): the survivors' workers are in the middle of sends and
// their links have writes in flight when the peer stops. They must still fail within the
// heartbeat timeout + 2 s, and the stopped process, continued after they are gone, must exit
// promptly (it once spun for minutes). Three rounds, as a failure here was intermittent.
TEST(ClusterTest, StoppedProcessUnderFullLoadIsFoundAndExitsWhenContinued) {
  constexpr int kHeartbeatMs = 1500;
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    Cluster cluster(3);
    std::vector<std::unique_ptr<Process>> processes;
    for (size_t p = 0; p < 3; ++p) {
      processes.push_back(
          cluster.start(p, {"flood", "120"},
                        {"-w", "2", "--heartbeat-timeout-ms", std::to_string(kHeartbeatMs)}));
    }
    for (auto& p : processes) ASSERT_TRUE(p->wait_for_output("running", seconds(60))) << p->err();
    std::this_thread::sleep_for(milliseconds(300));  // Data in flight everywhere.
    processes[1]->signal(SIGSTOP);
    const auto deadline = Clock::now() + milliseconds(kHeartbeatMs + 2000);
    expect_survivors_fail(processes, 1, deadline);
    processes[1]->signal(SIGCONT);
    auto code = processes[1]->wait_for(seconds(5));
    ASSERT_TRUE(code.has_value()) << "the stopped process still runs 5 s after it was continued";
    EXPECT_NE(*code, 0);
  }
}

// Issue 14 (memory): in a 2-process exchange whose one slow worker (1 ms per batch) is fed by
// sources that send as fast as they are scheduled, flow control holds every process under its
// bound for a minute. Without it (--flow-window-bytes=0) the slow worker's process passes the
// same bound within seconds (seen: about 3 s), which the second half checks: the test fails on
// a runtime without flow control.
TEST(ClusterTest, ASlowWorkerKeepsEveryProcessWithinItsMemoryBound) {
  // ASan keeps up to 256 MiB of freed memory in quarantine, resident; TSan's shadow grows with
  // every byte touched. Under ASan (GCC) one run measured 472 MiB with flow control and reached
  // only 896 MiB in the minute without (the build is slower): the bound sits between them.
  std::string limit_mib = "512";
#if defined(WEIR_ASAN)
  limit_mib = "768";
#elif defined(WEIR_TSAN)
  limit_mib = "1024";
#endif
  const char* seconds_text = std::getenv("WEIR_SLOW_WORKER_SECONDS");  // For shorter local runs.
  const std::string run_for = seconds_text != nullptr ? seconds_text : "60";
  {
    Cluster cluster(2);
    auto p0 = cluster.start(0, {"slow", run_for, limit_mib}, {"-w", "1"});
    auto p1 = cluster.start(1, {"slow", run_for, limit_mib}, {"-w", "1"});
    for (Process* p : {p0.get(), p1.get()}) {
      auto code = p->wait_for(seconds(std::stoi(run_for) + 60));
      ASSERT_TRUE(code.has_value()) << "still running a minute after its sources stopped";
      p->drain();
      EXPECT_EQ(*code, 0) << p->out() << p->err();
      std::printf("with flow control: %s", p->out().c_str());
    }
  }
  {
    Cluster cluster(2);
    const std::vector<std::string> flags{"-w", "1", "--flow-window-bytes=0"};
    auto p0 = cluster.start(0, {"slow", run_for, limit_mib}, flags);
    auto p1 = cluster.start(1, {"slow", run_for, limit_mib}, flags);
    auto code = p1->wait_for(seconds(std::stoi(run_for) + 60));
    ASSERT_TRUE(code.has_value());
    p1->drain();
    std::printf("without flow control: %s", p1->out().c_str());
    EXPECT_EQ(*code, 3) << "the slow worker's process stayed within " << limit_mib
                        << " MiB without flow control: " << p1->out() << p1->err();
  }
}

// Issue 14: a worker stuck in an operator (its transport still sends heartbeats) is found by its
// process's watchdog, which exits naming the operator; its peer fails with that error.
TEST(ClusterTest, AWorkerStuckInAnOperatorStopsTheClusterNamingIt) {
  Cluster cluster(2);
  const std::vector<std::string> flags{"-w", "2", "--operator-timeout-ms", "1000"};
  auto p0 = cluster.start(0, {"stuck", "1"}, flags);
  auto p1 = cluster.start(1, {"stuck", "1"}, flags);
  for (Process* p : {p1.get(), p0.get()}) {
    auto code = p->wait_for(seconds(30));
    ASSERT_TRUE(code.has_value()) << "a process still runs 30 s after start";
    EXPECT_EQ(*code, 1);
    p->drain();
    EXPECT_TRUE(contains(p->err(), "operator 'Map' in dataflow 'Dataflow'")) << p->err();
    EXPECT_TRUE(contains(p->err(), "(process 1)")) << p->err();
  }
}

TEST(ClusterTest, FailingWorkerFailsEveryProcess) {
  Cluster cluster(2);
  auto p0 = cluster.start(0, {"fail", "20"}, {"-w", "2"});
  auto p1 = cluster.start(1, {"fail", "20"}, {"-w", "2"});
  for (Process* p : {p0.get(), p1.get()}) {
    auto code = p->wait_for(seconds(60));
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 1);
    p->drain();
    EXPECT_TRUE(contains(p->err(), "injected failure at round 20")) << p->err();
  }
  EXPECT_TRUE(contains(p0->err(), "process 1")) << p0->err();  // It names where it came from.
}

// ---- Refused peers ----

TEST(ClusterTest, WrongClusterIdIsRefused) {
  Cluster cluster(2);
  auto p0 =
      cluster.start(0, {"spin", "1"}, {"--cluster-id", "ours", "--startup-timeout-ms", "3000"});
  auto p1 =
      cluster.start(1, {"spin", "1"}, {"--cluster-id", "theirs", "--startup-timeout-ms", "3000"});
  EXPECT_EQ(p1->wait_for(seconds(30)), 1);
  p1->drain();
  EXPECT_TRUE(contains(p1->err(), "refused")) << p1->err();
  EXPECT_TRUE(contains(p1->err(), "cluster 'theirs'")) << p1->err();
  EXPECT_EQ(p0->wait_for(seconds(30)), 1);
  p0->drain();
  EXPECT_TRUE(contains(p0->err(), "process 1")) << p0->err();
  EXPECT_TRUE(contains(p0->err(), "refused")) << p0->err();
}

// Issue 14 (flow control): a receiver returns credit by its own window, so processes with
// different windows would hold senders back for ever; the window is in the Hello.
TEST(ClusterTest, ADifferentFlowWindowIsRefused) {
  Cluster cluster(2);
  auto p0 = cluster.start(0, {"spin", "1"}, {"--startup-timeout-ms", "3000"});
  auto p1 = cluster.start(1, {"spin", "1"},
                          {"--flow-window-bytes", "4096", "--startup-timeout-ms", "3000"});
  EXPECT_EQ(p0->wait_for(seconds(30)), 1);
  p0->drain();
  EXPECT_TRUE(contains(p0->err(), "flow window of 4096 bytes")) << p0->err();
  EXPECT_EQ(p1->wait_for(seconds(30)), 1);
  p1->drain();
  EXPECT_TRUE(contains(p1->err(), "refused")) << p1->err();
}

TEST(ClusterTest, OlderIncarnationIsRefused) {
  Cluster cluster(2);
  auto p0 = cluster.start(0, {"spin", "1"}, {"--incarnation", "7", "--startup-timeout-ms", "3000"});
  auto p1 = cluster.start(1, {"spin", "1"}, {"--incarnation", "6", "--startup-timeout-ms", "3000"});
  EXPECT_EQ(p1->wait_for(seconds(30)), 1);
  p1->drain();
  EXPECT_TRUE(contains(p1->err(), "stale")) << p1->err();
  EXPECT_EQ(p0->wait_for(seconds(30)), 1);
}

// ---- TLS ----

// Makes, in `dir`: a CA; per-process certificates it signs, process0 and process1, each for
// 127.0.0.1 with the URI subjectAltName weir:process:<p> (docs/cluster.md, "Mutual TLS"); one it
// signs for 127.0.0.1 that names no process ("node", a shared certificate); and a self-signed
// "rogue" one.
void make_certificates(const std::filesystem::path& dir) {
  const std::string script = R"(set -e
cd ")" + dir.string() + R"("
EC="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $EC -keyout ca.key -out ca.pem -days 2 -subj /CN=weir-test-ca 2>/dev/null
openssl req $EC -keyout node.key -out node.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 2 \
  -extfile san.ext 2>/dev/null
for p in 0 1; do
  openssl req $EC -keyout process$p.key -out process$p.csr -subj /CN=weir-process-$p 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,URI:weir:process:%s\n' $p > san$p.ext
  openssl x509 -req -in process$p.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out process$p.pem -days 2 -extfile san$p.ext 2>/dev/null
done
openssl req -x509 $EC -keyout rogue.key -out rogue.pem -days 2 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>/dev/null
)";
  // Run from a file: quoted into a command line, the script's own quotes ended the quoting, and
  // printf's "\n" reached it as "n" (the SANs were "localhostn", "weir:process:0n").
  const std::filesystem::path file = dir / "make-certificates.sh";
  std::ofstream(file) << script;
  ASSERT_EQ(std::system(("bash '" + file.string() + "'").c_str()), 0) << "openssl failed";
}

// Flags for mutual TLS with the certificate `name` (made by make_certificates in `dir`).
std::vector<std::string> tls_flags(const std::filesystem::path& dir, const std::string& name) {
  return {"--tls-cert", (dir / (name + ".pem")).string(),
          "--tls-key",  (dir / (name + ".key")).string(),
          "--tls-ca",   (dir / "ca.pem").string()};
}

TEST(ClusterTest, MutualTlsLinksAndRefusesAPeerWithoutACaCertificate) {
  Cluster cluster(2);
  make_certificates(cluster.dir());
  auto tls = [&](const std::string& name) { return tls_flags(cluster.dir(), name); };
  {
    auto p0 = cluster.start(0, {"spin", "1"}, tls("process0"));
    auto p1 = cluster.start(1, {"spin", "1"}, tls("process1"));
    EXPECT_EQ(p0->wait_for(seconds(60)), 0) << p0->err();
    EXPECT_EQ(p1->wait_for(seconds(60)), 0) << p1->err();
  }
  auto flags = tls("rogue");
  flags.insert(flags.end(), {"--startup-timeout-ms", "3000"});
  auto good = tls("process0");
  good.insert(good.end(), {"--startup-timeout-ms", "3000"});
  auto p0 = cluster.start(0, {"spin", "1"}, good);
  auto p1 = cluster.start(1, {"spin", "1"}, flags);
  EXPECT_EQ(p0->wait_for(seconds(30)), 1);
  EXPECT_EQ(p1->wait_for(seconds(30)), 1);
  p0->drain();
  p1->drain();
  EXPECT_TRUE(contains(p0->err(), "process 1")) << p0->err();  // Never got through.
  EXPECT_TRUE(contains(p1->err(), "process 0")) << p1->err();
}

TEST(ClusterTest, MutualTlsWithPerProcessCertificatesGetsTheRightAnswer) {
  Cluster cluster(2);
  make_certificates(cluster.dir());
  std::vector<std::unique_ptr<Process>> processes;
  for (size_t p = 0; p < 2; ++p) {
    auto flags = tls_flags(cluster.dir(), "process" + std::to_string(p));
    flags.insert(flags.end(), {"-w", "2"});
    processes.push_back(cluster.start(p, {"property", "1", "20"}, flags));
  }
  for (auto& p : processes) {
    EXPECT_EQ(p->wait_for(seconds(120)), 0) << p->err();
    p->drain();
  }
  // Process 0 compared every seed's records with the single-threaded reference.
  EXPECT_TRUE(contains(processes[0]->out(), "property: ok, seeds 1..20 on 2 processes"))
      << processes[0]->out() << processes[0]->err();
}

// Process `p` of 2 presents the certificate `certificate[p]`; both exit 1. Returns their stderr.
std::vector<std::string> run_with_certificates(const std::vector<std::string>& certificate) {
  Cluster cluster(2);
  make_certificates(cluster.dir());
  std::vector<std::unique_ptr<Process>> processes;
  for (size_t p = 0; p < 2; ++p) {
    auto flags = tls_flags(cluster.dir(), certificate[p]);
    flags.insert(flags.end(), {"--startup-timeout-ms", "3000"});
    processes.push_back(cluster.start(p, {"spin", "1"}, flags));
  }
  std::vector<std::string> errors;
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(processes[p]->wait_for(seconds(30)), 1)
        << "process " << p << " with certificate " << certificate[p] << " was not refused";
    processes[p]->drain();
    errors.push_back(processes[p]->err());
  }
  return errors;
}

TEST(ClusterTest, MutualTlsRefusesADialerWhoseCertificateNamesAnotherProcess) {
  // Process 1 dials with process 0's certificate, signed by the CA: process 0 refuses it.
  auto errors = run_with_certificates({"process0", "process0"});
  EXPECT_TRUE(contains(errors[0], "saying it is process 1")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "does not name process 1")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "weir:process:0")) << errors[0];  // The SANs it saw.
  // The refused side is told only that it was refused.
  EXPECT_TRUE(contains(errors[1], "was refused by process 0")) << errors[1];
  EXPECT_FALSE(contains(errors[1], "weir:process")) << errors[1];
}

TEST(ClusterTest, MutualTlsRefusesAnAcceptorWhoseCertificateNamesAnotherProcess) {
  // Process 0 answers with process 1's certificate: process 1, dialing it, refuses it.
  auto errors = run_with_certificates({"process1", "process1"});
  EXPECT_TRUE(contains(errors[1], "does not name process 0")) << errors[1];
  EXPECT_TRUE(contains(errors[1], "weir:process:1")) << errors[1];
  EXPECT_TRUE(contains(errors[0], "gave up waiting for process 1")) << errors[0];
}

TEST(ClusterTest, MutualTlsRefusesASharedCertificateWithoutProcessNames) {
  auto errors = run_with_certificates({"node", "node"});
  EXPECT_TRUE(contains(errors[0], "does not name process 1")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "127.0.0.1, localhost")) << errors[0];  // The SANs it saw.
  EXPECT_TRUE(contains(errors[1], "was refused by process 0")) << errors[1];
}

// ---- Links off loopback need TLS ----

TEST(ClusterTest, NonLoopbackHostfileNeedsTlsOrInsecureLinks) {
  Cluster cluster(2);
  make_certificates(cluster.dir());
  // Process 1 would be on TEST-NET-1 (RFC 5737): never reached, process 0 only listens.
  const std::string remote = "192.0.2.1:" + std::to_string(cluster.port(1));
  const std::string hostfile = (cluster.dir() / "remote-hostfile").string();
  std::ofstream(hostfile) << cluster.address(0) << "\n" << remote << "\n";
  auto start = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {
        WEIR_CLUSTER_CHILD,     "spin", "1", "-n", "2", "-p", "0", "-h", hostfile,
        "--startup-timeout-ms", "2000"};
    args.insert(args.end(), flags.begin(), flags.end());
    return std::make_unique<Process>(args);
  };
  {
    // Without TLS: refused at once (before the start-up timeout), naming the address and flags.
    auto p0 = start({"--startup-timeout-ms", "60000"});
    EXPECT_EQ(p0->wait_for(seconds(20)), 1) << "it did not fail fast";
    p0->drain();
    for (const std::string& words : {remote, std::string("--tls-cert"), std::string("--tls-key"),
                                     std::string("--tls-ca"), std::string("--insecure-links")}) {
      EXPECT_TRUE(contains(p0->err(), words)) << words << " not in: " << p0->err();
    }
  }
  {
    // TLS without a CA and without a secret: callers are not authenticated at all; refused.
    std::vector<std::string> flags = tls_flags(cluster.dir(), "process0");
    flags.resize(4);  // --tls-cert and --tls-key only.
    auto p0 = start(flags);
    EXPECT_EQ(p0->wait_for(seconds(20)), 1) << "it did not fail fast";
    p0->drain();
    EXPECT_TRUE(contains(p0->err(), "TLS without --tls-ca")) << p0->err();
  }
  const std::string secret_file = (cluster.dir() / "secret").string();
  std::ofstream(secret_file) << "0123456789abcdef0123456789abcdef\n";
  std::vector<std::string> tls_and_secret = tls_flags(cluster.dir(), "process0");
  tls_and_secret.resize(4);
  tls_and_secret.insert(tls_and_secret.end(), {"--cluster-secret-file", secret_file});
  // With mutual TLS, TLS and a secret, or the opt-out, it starts and waits for process 1 (which
  // never comes).
  for (const auto& flags : {tls_flags(cluster.dir(), "process0"), tls_and_secret,
                            std::vector<std::string>{"--insecure-links"}}) {
    auto p0 = start(flags);
    EXPECT_EQ(p0->wait_for(seconds(30)), 1);
    p0->drain();
    EXPECT_TRUE(contains(p0->err(), "gave up waiting for process 1 (" + remote + ")")) << p0->err();
  }
}

// ---- Bad input on the wire ----

// A raw gRPC call to Link.Connect, to send bytes no weir process would send.
class RawCall {
 public:
  explicit RawCall(const std::string& address)
      : stub_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {
    context_.set_deadline(std::chrono::system_clock::now() + seconds(30));
    call_ = stub_.PrepareCall(&context_, "/weir.protocol.v1.Link/Connect", &cq_);
    call_->StartCall(this);
    next();
  }
  bool write(const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    call_->Write(buffer, this);
    return next();
  }
  // The next message, or nullopt when the stream ended.
  std::optional<std::string> read() {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, this);
    if (!next()) return std::nullopt;
    grpc::Slice slice;
    EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
    return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  grpc::Status finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    next();
    return status;
  }

 private:
  bool next() {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq_.Next(&tag, &ok));
    return ok;
  }

  grpc::GenericStub stub_;
  grpc::CompletionQueue cq_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
};

// A TCP connection to the loopback port, or -1.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  ::close(fd);
  return -1;
}

// True once something listens on the loopback port (false after a generous deadline).
bool wait_listening(int port) {
  for (auto deadline = Clock::now() + seconds(30); Clock::now() < deadline;) {
    if (const int fd = connect_to(port); fd >= 0) {
      ::close(fd);
      return true;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

// Sends `bytes` on a fresh TCP connection; true if the server then closed it.
bool closed_after_raw_bytes(int port, const std::string& bytes) {
  const int fd = connect_to(port);
  if (fd < 0) return false;
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  const auto deadline = Clock::now() + seconds(20);
  bool closed = false;
  while (!closed && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    closed = n <= 0;  // EOF or reset; anything read before is the server's goodbye frames.
  }
  ::close(fd);
  return closed;
}

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

protocol::Hello hello_as(uint32_t process, const std::string& cluster_id) {
  protocol::Hello hello;
  hello.cluster_id = cluster_id;
  hello.process = process;
  hello.workers = 1;
  hello.processes = 2;
  hello.nonce = std::string(protocol::kNonceBytes, 'n');
  hello.flow_window = Config::kDefaultFlowWindowBytes;  // As the processes' (their default).
  return hello;
}

TEST(ClusterTest, GarbageAndTruncatedFramesLeaveTheServerRunning) {
  Cluster cluster(2);
  auto p0 = cluster.start(0, {"spin", "1"}, {"--cluster-id", "wire"});
  ASSERT_TRUE(wait_listening(cluster.port(0)));
  std::mt19937_64 rng(7);
  // Not HTTP/2 at all, and HTTP/2 with garbage frames: gRPC closes the connection.
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(closed_after_raw_bytes(cluster.port(0), random_bytes(rng, 4096)));
  }
  EXPECT_TRUE(closed_after_raw_bytes(cluster.port(0),
                                     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + random_bytes(rng, 4096)));
  // Link.Connect calls whose first message is not a valid Hello: refused, the call ends.
  std::string hello_bytes;
  protocol::append_hello(hello_as(1, "wire"), hello_bytes);
  std::string data_first;
  protocol::append_data(0, 1, 0, "x", data_first);
  std::string other_cluster;
  protocol::append_hello(hello_as(1, "another"), other_cluster);
  const std::vector<std::pair<std::string, std::string>> attempts = {
      {random_bytes(rng, 1000), "malformed"},
      {hello_bytes.substr(0, hello_bytes.size() / 2), "malformed"},
      {hello_bytes.substr(0, hello_bytes.size() - 1), "malformed"},
      {data_first, "must be one Hello"},
      {other_cluster, "cluster 'another'"},
  };
  for (const auto& [bytes, words] : attempts) {
    RawCall call(cluster.address(0));
    call.write(bytes);
    EXPECT_EQ(call.read(), std::nullopt);
    const grpc::Status status = call.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    EXPECT_TRUE(contains(status.error_message(), words)) << status.error_message();
  }
  // Still there: the real process 1 joins and the cluster runs to the end.
  EXPECT_FALSE(p0->wait_for(milliseconds(0)).has_value());
  auto p1 = cluster.start(1, {"spin", "1"}, {"--cluster-id", "wire"});
  EXPECT_EQ(p1->wait_for(seconds(60)), 0) << p1->err();
  EXPECT_EQ(p0->wait_for(seconds(60)), 0) << p0->err();
}

// Links to process 0 as a fake process 1 (a valid Hello and Proof: no secret is set), then sends
// `frames`.
void established_peer_sends(const std::string& frames, const std::string& words) {
  Cluster cluster(2);
  auto p0 = cluster.start(0, {"spin", "60"}, {"--cluster-id", "wire"});
  std::unique_ptr<RawCall> call;
  std::optional<std::string> answer;
  const protocol::Hello mine = hello_as(1, "wire");
  // Process 0 may not listen yet: retry until it answers our Hello with its own.
  for (auto deadline = Clock::now() + seconds(30); !answer && Clock::now() < deadline;) {
    call = std::make_unique<RawCall>(cluster.address(0));
    std::string hello;
    protocol::append_hello(mine, hello);
    call->write(hello);
    answer = call->read();
    if (!answer) std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_TRUE(answer.has_value()) << "process 0 never answered";
  protocol::v1::FrameBatch batch;
  ASSERT_TRUE(protocol::parse_batch(*answer, batch).ok());
  absl::StatusOr<protocol::Hello> theirs = protocol::read_hello(batch);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  std::string proof;
  protocol::append_proof(protocol::handshake_mac("", protocol::Role::kDialer, mine, *theirs),
                         proof);
  call->write(proof);
  call->write(frames);
  auto code = p0->wait_for(seconds(30));
  ASSERT_TRUE(code.has_value()) << "process 0 kept running";
  EXPECT_EQ(*code, 1);
  p0->drain();
  EXPECT_TRUE(contains(p0->err(), "process 1")) << p0->err();
  EXPECT_TRUE(contains(p0->err(), words)) << p0->err();
}

TEST(ClusterTest, FrameFromAWorkerThePeerDoesNotHaveClosesTheLink) {
  std::string frames;
  protocol::append_data(1, 0, 0, "x", frames);  // Worker 0 is process 0's, not the sender's.
  established_peer_sends(frames, "not one of the sender's workers");
}

TEST(ClusterTest, MalformedBatchFromAPeerClosesTheLink) {
  std::mt19937_64 rng(11);
  established_peer_sends(random_bytes(rng, 512), "malformed");
}

TEST(ClusterTest, MalformedPayloadsFromAPeerCloseTheLink) {
  // Garbage for every channel the spinning dataflow may have built: its decoder refuses it.
  std::string frames;
  for (uint64_t channel = 0; channel < 8; ++channel) {
    protocol::append_data(channel, 1, 0, "\x05garbage", frames);
  }
  established_peer_sends(frames, "refuses");
}

// ---- weir-launch ----

TEST(ClusterTest, LaunchStopsTheRestAndReturnsTheFirstFailure) {
  const auto start = Clock::now();
  Process launch(
      {WEIR_LAUNCH, "-n", "3", "-w", "1", "--", WEIR_CLUSTER_CHILD, "exit-if", "1", "3"});
  ASSERT_EQ(launch.wait_for(seconds(20)), 3) << launch.err();
  // Without being stopped, the others would wait 30 s for process 1 (the start-up timeout).
  EXPECT_LT(Clock::now() - start, seconds(20));
}

// weir-launch running `/bin/sh -c SCRIPT sh` as each of `processes` processes: the flags it adds
// are the script's positional parameters, so the process index is $4 (-n N -p I -h FILE -w W).
std::vector<std::string> launch_script(const std::string& processes, const std::string& script) {
  return {WEIR_LAUNCH, "-n", processes, "-w", "1", "--", "/bin/sh", "-c", script, "sh"};
}

// True while `pid` exists and is not a zombie.
bool is_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t name_end = line.rfind(") ");  // The state follows the command name.
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] != 'Z';
}

// A temporary directory for a launch test, and the grandchildren its scripts started (their pids
// in files `grandchild.I`), killed at the end whatever happened.
class LaunchDir {
 public:
  LaunchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "weir-launch-test.XXXXXX");
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  ~LaunchDir() {
    for (pid_t pid : pids_) {
      if (is_alive(pid)) ::kill(pid, SIGKILL);
    }
    std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Script lines that start `command` in the background and record its pid as this process's
  // grandchild.
  std::string start_grandchild(const std::string& command) const {
    const std::string file = path("grandchild.$4");
    return command + " &\necho $! > " + file + ".tmp && mv " + file + ".tmp " + file + "\n";
  }
  // The recorded grandchildren of processes 0 .. n-1.
  std::vector<pid_t> grandchildren(size_t n) {
    pids_.clear();
    for (size_t i = 0; i < n; ++i) {
      std::ifstream in(path("grandchild." + std::to_string(i)));
      pid_t pid = 0;
      EXPECT_TRUE(in >> pid) << "process " << i << " recorded no grandchild";
      if (pid > 0) pids_.push_back(pid);
    }
    return pids_;
  }

 private:
  std::filesystem::path dir_;
  std::vector<pid_t> pids_;
};

// Every one of `pids` is gone (or a zombie) within `d`.
void expect_gone(const std::vector<pid_t>& pids, Clock::duration d) {
  const auto deadline = Clock::now() + d;
  for (pid_t pid : pids) {
    while (is_alive(pid) && Clock::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
    EXPECT_FALSE(is_alive(pid)) << "grandchild " << pid << " still runs";
  }
}

TEST(ClusterTest, LaunchStopsEachProcessWithItsProcessGroup) {
  LaunchDir dir;
  // Each process starts a grandchild that holds its output; process 1 then fails (once process
  // 0's grandchild runs) and process 0 waits. Stopping only process 0 would leave both
  // grandchildren running, and weir-launch waiting for them to close its pipes.
  const std::string script = dir.start_grandchild("sleep 600") +
                             "if [ \"$4\" = 1 ]; then\n"
                             "  while [ ! -e " +
                             dir.path("grandchild.0") +
                             " ]; do sleep 0.01; done\n"
                             "  exit 3\n"
                             "fi\n"
                             "wait\n";
  Process launch(launch_script("2", script));
  const auto code = launch.wait_for(seconds(20));
  const std::vector<pid_t> grandchildren = dir.grandchildren(2);
  ASSERT_EQ(code, 3) << "weir-launch still runs 20 s after process 1 failed" << launch.err();
  expect_gone(grandchildren, seconds(5));
}

TEST(ClusterTest, LaunchExitsOnceItsProcessesAreReaped) {
  LaunchDir dir;
  // Both processes succeed at once, leaving grandchildren that hold their output pipes open;
  // process 1's ignores SIGTERM.
  const std::string script =
      "if [ \"$4\" = 1 ]; then trap '' TERM; fi\n" + dir.start_grandchild("sleep 600") + "exit 0\n";
  const auto start = Clock::now();
  Process launch(launch_script("2", script));
  const auto code = launch.wait_for(seconds(20));
  const std::vector<pid_t> grandchildren = dir.grandchildren(2);
  ASSERT_EQ(code, 0) << "weir-launch still runs 20 s after its processes exited" << launch.err();
  EXPECT_LT(Clock::now() - start, seconds(10));  // The SIGTERM grace is 3 s.
  expect_gone(grandchildren, seconds(5));
}

TEST(ClusterTest, LaunchStartedWithSigchldIgnoredReturnsTheFirstFailure) {
  // An ignored SIGCHLD is inherited through exec; with it, children are reaped by the kernel and
  // waitpid fails (ECHILD).
  Process launch({WEIR_LAUNCH, "-n", "3", "-w", "1", "--", WEIR_CLUSTER_CHILD, "exit-if", "1", "3"},
                 {}, {SIGCHLD});
  const auto code = launch.wait_for(seconds(20));
  if (!code) {
    launch.signal(SIGTERM);
    EXPECT_TRUE(launch.wait_for(seconds(10)).has_value()) << "and it ignores SIGTERM";
  }
  ASSERT_EQ(code, 3) << "weir-launch started with SIGCHLD ignored still runs after 20 s"
                     << launch.err();
}

TEST(ClusterTest, LaunchPassesSignalsOnAsTheyCame) {
  for (const auto& [sig, name] :
       {std::pair{SIGINT, "INT"}, std::pair{SIGTERM, "TERM"}, std::pair{SIGHUP, "HUP"}}) {
    SCOPED_TRACE(name);
    const std::string script =
        "for s in INT TERM HUP; do trap \"echo got $s; exit 7\" $s; done\n"
        "echo ready\n"
        "while :; do sleep 1; done\n";
    Process launch(launch_script("2", script));
    ASSERT_TRUE(launch.wait_for_output("[0] ready", seconds(20))) << launch.err();
    ASSERT_TRUE(launch.wait_for_output("[1] ready", seconds(20))) << launch.err();
    launch.signal(sig);
    ASSERT_EQ(launch.wait_for(seconds(20)), 128 + sig) << launch.err();
    launch.drain();
    for (const std::string process : {"[0] ", "[1] "}) {
      EXPECT_TRUE(contains(launch.out(), process + "got " + name)) << launch.out();
    }
  }
}

TEST(ClusterTest, LaunchStartsAgainWhenAPortIsTakenBeforeItsProcessListens) {
  LaunchDir dir;
  // Each process waits for the test to take the ports of the first hostfile (as another program
  // could between weir-launch choosing them and the process listening), then runs a round.
  const std::string script = "while [ ! -e " + dir.path("taken") +
                             " ]; do sleep 0.01; done\n"
                             "exec " WEIR_CLUSTER_CHILD " spin 0 \"$@\"\n";
  Process launch(launch_script("2", script), {{"TMPDIR", dir.path("")}});

  // The first hostfile weir-launch writes (in a fresh directory under TMPDIR), once complete.
  std::vector<int> ports;
  const auto deadline = Clock::now() + seconds(20);
  while (ports.size() < 2 && Clock::now() < deadline) {
    ports.clear();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path(""), ec)) {
      std::ifstream in(entry.path() / "hostfile");
      std::string line;
      while (std::getline(in, line) && !in.eof()) {  // Only lines ended by a newline.
        ports.push_back(std::stoi(line.substr(line.rfind(':') + 1)));
      }
    }
    if (ports.size() < 2) std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(ports.size(), 2u) << "no hostfile from weir-launch under " << dir.path("");
  std::vector<int> taken;
  for (int port : ports) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << "port " << port << ": " << std::strerror(errno);
    taken.push_back(fd);
  }
  std::ofstream(dir.path("taken")) << "\n";

  const auto code = launch.wait_for(seconds(60));
  for (int fd : taken) ::close(fd);
  ASSERT_EQ(code, 0) << launch.err();
  launch.drain();
  EXPECT_TRUE(contains(launch.out(), "[0] running")) << launch.out();
  EXPECT_TRUE(contains(launch.out(), "[1] running")) << launch.out();
  EXPECT_TRUE(contains(launch.err(), "again")) << launch.err();
}

// ---- weir-launch: the cluster secret and per-process certificates ----

// The VALUE of the first line "[I] KEY=VALUE" in `out`, or nullopt.
std::optional<std::string> printed(const std::string& out, size_t process, const std::string& key) {
  const std::string prefix = "[" + std::to_string(process) + "] " + key + "=";
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return std::nullopt;
}

// What WEIR_CLUSTER_SECRET is in each of the 2 processes weir-launch starts ("(unset)" if it is
// not set), with `env` added to weir-launch's environment and `args` to the processes' (before
// the flags weir-launch adds). Every process's command line must not contain it.
std::vector<std::string> secrets_seen(
    const std::vector<std::pair<std::string, std::string>>& env = {},
    const std::vector<std::string>& args = {}) {
  std::vector<std::string> command =
      launch_script("2", "echo \"secret=${WEIR_CLUSTER_SECRET-(unset)}\"\necho \"args=$*\"\n");
  command.insert(command.end(), args.begin(), args.end());
  Process launch(command, env);
  EXPECT_EQ(launch.wait_for(seconds(20)), 0) << launch.err();
  launch.drain();
  std::vector<std::string> secrets;
  for (size_t p = 0; p < 2; ++p) {
    const auto secret = printed(launch.out(), p, "secret");
    const auto process_args = printed(launch.out(), p, "args");
    EXPECT_TRUE(secret && process_args) << "process " << p << " printed\n" << launch.out();
    secrets.push_back(secret.value_or("(not printed)"));
    if (secret && process_args && secret->size() >= 16) {
      EXPECT_FALSE(contains(*process_args, *secret)) << "the secret is on the command line";
    }
  }
  return secrets;
}

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

TEST(ClusterTest, LaunchGivesItsProcessesAFreshSecretInTheEnvironment) {
  const std::vector<std::string> first = secrets_seen();
  EXPECT_EQ(first[0].size(), 64u) << "32 random bytes, hex-encoded: " << first[0];
  EXPECT_TRUE(is_hex(first[0])) << first[0];
  EXPECT_EQ(first[1], first[0]) << "the processes of one cluster share the secret";
  const std::vector<std::string> second = secrets_seen();
  EXPECT_EQ(second[0].size(), 64u) << second[0];
  EXPECT_NE(second[0], first[0]) << "a fresh secret for each cluster";
  // An empty $WEIR_CLUSTER_SECRET is no secret (the processes would run without one).
  const std::vector<std::string> empty = secrets_seen({{"WEIR_CLUSTER_SECRET", ""}});
  EXPECT_EQ(empty[0].size(), 64u) << empty[0];
}

TEST(ClusterTest, LaunchKeepsASecretTheUserGave) {
  const std::string mine = "a-secret-the-user-chose-0123456789";
  for (const std::string& secret : secrets_seen({{"WEIR_CLUSTER_SECRET", mine}})) {
    EXPECT_EQ(secret, mine);
  }
  // A secret in a file: adding $WEIR_CLUSTER_SECRET would give it twice, which is an error.
  for (const std::string& secret : secrets_seen({{"WEIR_CLUSTER_SECRET_FILE", "/dev/null"}})) {
    EXPECT_EQ(secret, "(unset)") << "with $WEIR_CLUSTER_SECRET_FILE";
  }
  for (const std::string& secret : secrets_seen({}, {"--cluster-secret-file", "/dev/null"})) {
    EXPECT_EQ(secret, "(unset)") << "with --cluster-secret-file FILE";
  }
  for (const std::string& secret : secrets_seen({}, {"--cluster-secret-file=/dev/null"})) {
    EXPECT_EQ(secret, "(unset)") << "with --cluster-secret-file=FILE";
  }
}

TEST(ClusterTest, LaunchSecretKeepsOutAProcessWithoutIt) {
  // With $DROP 1, process 1 drops the secret weir-launch gave it: it then has the cluster id,
  // hostfile, -n and -w, everything a member has but the secret, and the two never link.
  const std::string script =
      "if [ \"$4\" = 1 ] && [ \"$DROP\" = 1 ]; then unset WEIR_CLUSTER_SECRET; fi\n"
      "exec " WEIR_CLUSTER_CHILD " spin 1 --startup-timeout-ms 3000 \"$@\"\n";
  {
    Process launch(launch_script("2", script), {{"DROP", "0"}});
    ASSERT_EQ(launch.wait_for(seconds(60)), 0) << "with the secret it gave" << launch.err();
  }
  Process launch(launch_script("2", script), {{"DROP", "1"}});
  ASSERT_EQ(launch.wait_for(seconds(60)), 1)
      << "a process without the secret linked" << launch.err() << launch.out();
  launch.drain();
  // Whichever start-up timeout ends first: process 0 refused the caller, or process 1 refused
  // process 0's answer (each proves the secret to the other).
  EXPECT_TRUE(contains(launch.err(), "did not prove the cluster secret")) << launch.err();
}

TEST(ClusterTest, LaunchGivesEachProcessItsOwnCertificate) {
  LaunchDir dir;
  const std::filesystem::path certs = dir.path("");
  make_certificates(certs);
  // process{p}.pem names weir:process:<p> only: a process that presented another's would be
  // refused. Both flag forms, FLAG FILE and FLAG=FILE.
  Process launch({WEIR_LAUNCH, "-n", "2", "-w", "1", "--", WEIR_CLUSTER_CHILD, "spin", "1",
                  "--tls-cert", (certs / "process{p}.pem").string(),
                  "--tls-key=" + (certs / "process{p}.key").string(), "--tls-ca",
                  (certs / "ca.pem").string()});
  ASSERT_EQ(launch.wait_for(seconds(60)), 0) << launch.err();
  launch.drain();
  EXPECT_TRUE(contains(launch.out(), "[0] running")) << launch.out();
  EXPECT_TRUE(contains(launch.out(), "[1] running")) << launch.out();
}

// ---- weir-launch --restart: supervision ----

// weir-launch with `flags` running `/bin/sh -c SCRIPT sh` as each of 2 processes (the process
// index is $4, as with launch_script).
std::vector<std::string> supervise_script(const std::vector<std::string>& flags,
                                          const std::string& script) {
  std::vector<std::string> command = {WEIR_LAUNCH, "-n", "2", "-w", "1"};
  command.insert(command.end(), flags.begin(), flags.end());
  for (const std::string& arg :
       {std::string("--"), std::string("/bin/sh"), std::string("-c"), script, std::string("sh")}) {
    command.push_back(arg);
  }
  return command;
}

// The lines of `file` (none if there is no such file).
std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value of `key` in the one-line JSON object `line`, as written (a string keeps its quotes),
// or "(missing)". Enough for the restart log, whose values hold no commas or braces.
std::string json_field(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\"");
  if (at == std::string::npos) return "(missing)";
  at = line.find(':', at + key.size() + 2);
  if (at == std::string::npos) return "(missing)";
  at = line.find_first_not_of(' ', at + 1);
  const size_t end = line.find_first_of(",}", at);
  if (at == std::string::npos || end == std::string::npos) return "(missing)";
  std::string value = line.substr(at, end - at);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

// True if `value` is a quoted RFC 3339 UTC time, "YYYY-MM-DDTHH:MM:SS[.fff]Z".
bool is_utc_time(const std::string& value) {
  static const std::regex kTime(R"re("\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")re");
  return std::regex_match(value, kTime);
}

TEST(ClusterTest, LaunchRestartStartsTheClusterAgainAndLogsEachRestart) {
  LaunchDir dir;
  const std::string log = dir.path("restarts.log");
  // Process 1 fails (exit 1) at its first three starts, each time once process 0 of the same
  // start runs (so that there is a process to stop), and succeeds at the fourth; process 0 runs
  // until process 1 has succeeded. Both print their $WEIR_INCARNATION. ($D is the directory.)
  const std::string script =
      "echo \"incarnation=${WEIR_INCARNATION-(unset)}\"\n"
      "if [ \"$4\" = 0 ]; then\n"
      "  touch \"$D/up.$WEIR_INCARNATION\"\n"
      "  while [ ! -e \"$D/done\" ]; do sleep 0.01; done\n"
      "  exit 0\n"
      "fi\n"
      "while [ ! -e \"$D/up.$WEIR_INCARNATION\" ]; do sleep 0.01; done\n"
      "n=$(( $(cat \"$D/starts\" 2>/dev/null || echo 0) + 1 ))\n"
      "echo $n > \"$D/starts\"\n"
      "if [ $n -le 3 ]; then exit 1; fi\n"
      "touch \"$D/done\"\n";
  Process launch(
      supervise_script({"--restart", "--backoff", "0.05:0.2", "--restart-log", log}, script),
      {{"D", dir.path("")}});
  ASSERT_EQ(launch.wait_for(seconds(60)), 0) << launch.err();
  launch.drain();

  const std::vector<std::string> lines = lines_of(log);
  ASSERT_EQ(lines.size(), 3u) << "one line per restart in " << log << "\n" << launch.err();
  std::vector<double> backoffs;
  for (size_t k = 0; k < lines.size(); ++k) {
    SCOPED_TRACE(lines[k]);
    EXPECT_TRUE(is_utc_time(json_field(lines[k], "time")));
    EXPECT_EQ(json_field(lines[k], "process"), "1");
    EXPECT_EQ(json_field(lines[k], "exit"), "1");
    EXPECT_EQ(json_field(lines[k], "signal"), "null");
    EXPECT_EQ(json_field(lines[k], "restart"), std::to_string(k + 1));
    EXPECT_EQ(json_field(lines[k], "incarnation"), std::to_string(k + 2));
    const double backoff = std::strtod(json_field(lines[k], "backoff_s").c_str(), nullptr);
    EXPECT_GE(backoff, 0.05);
    EXPECT_LE(backoff, 0.2);
    backoffs.push_back(backoff);
    EXPECT_TRUE(contains(launch.err(), "weir-launch: process 1 exited with code 1; restart " +
                                           std::to_string(k + 1) + " in "))
        << launch.err();
  }
  EXPECT_TRUE(std::is_sorted(backoffs.begin(), backoffs.end())) << "the backoff never shrinks";
  EXPECT_LT(backoffs.front(), backoffs.back()) << "the backoff grows";
  // Every start, every process, the incarnation one higher than the start before.
  for (const std::string process : {"[0] ", "[1] "}) {
    for (int incarnation = 1; incarnation <= 4; ++incarnation) {
      EXPECT_TRUE(
          contains(launch.out(), process + "incarnation=" + std::to_string(incarnation) + "\n"))
          << launch.out();
    }
    EXPECT_FALSE(contains(launch.out(), process + "incarnation=5")) << launch.out();
  }
}

TEST(ClusterTest, LaunchRestartEndsWithTheLastFailureAfterMaxRestarts) {
  LaunchDir dir;
  const std::string log = dir.path("restarts.log");
  // Process 1 kills itself at every start; process 0 runs until it is stopped.
  const std::string script =
      "echo \"incarnation=$WEIR_INCARNATION\"\n"
      "if [ \"$4\" = 1 ]; then kill -KILL $$; fi\n"
      "while :; do sleep 0.05; done\n";
  // The user's $WEIR_INCARNATION is the first start's.
  Process launch(supervise_script({"--restart", "--max-restarts", "2", "--backoff", "0.05:0.2",
                                   "--restart-log", log},
                                  script),
                 {{"WEIR_INCARNATION", "7"}});
  ASSERT_EQ(launch.wait_for(seconds(60)), 128 + SIGKILL) << launch.err();
  launch.drain();

  const std::vector<std::string> lines = lines_of(log);
  ASSERT_EQ(lines.size(), 2u) << "one line per restart in " << log << "\n" << launch.err();
  for (size_t k = 0; k < lines.size(); ++k) {
    SCOPED_TRACE(lines[k]);
    EXPECT_EQ(json_field(lines[k], "process"), "1");
    EXPECT_EQ(json_field(lines[k], "exit"), "null");
    EXPECT_EQ(json_field(lines[k], "signal"), "\"SIGKILL\"");
    EXPECT_EQ(json_field(lines[k], "restart"), std::to_string(k + 1));
    EXPECT_EQ(json_field(lines[k], "incarnation"), std::to_string(k + 8));
  }
  EXPECT_TRUE(
      contains(launch.err(), "weir-launch: process 1 exited with signal SIGKILL; restart 2"))
      << launch.err();
  EXPECT_TRUE(contains(launch.err(), "--max-restarts")) << "it says why it stopped\n"
                                                        << launch.err();
  for (const std::string incarnation : {"7", "8", "9"}) {
    EXPECT_TRUE(contains(launch.out(), "[1] incarnation=" + incarnation + "\n")) << launch.out();
  }
  EXPECT_FALSE(contains(launch.out(), "incarnation=10")) << launch.out();
}

// A final exit (a replica fenced by a newer one exits 3) is not restarted: weir-launch stops the
// rest and ends with its code, where another failure would be restarted.
TEST(ClusterTest, LaunchRestartDoesNotRestartAFinalExit) {
  LaunchDir dir;
  const std::string log = dir.path("restarts.log");
  const std::string script =
      "echo \"incarnation=$WEIR_INCARNATION\"\n"
      "if [ \"$4\" = 1 ]; then exit 3; fi\n"
      "while :; do sleep 0.05; done\n";
  Process launch(supervise_script({"--restart", "--final-exit", "5", "--final-exit", "3",
                                   "--backoff", "0.05:0.2", "--restart-log", log},
                                  script));
  ASSERT_EQ(launch.wait_for(seconds(60)), 3) << launch.err();
  launch.drain();
  EXPECT_TRUE(lines_of(log).empty()) << "no restart";
  EXPECT_TRUE(contains(launch.err(), "process 1 exited with code 3; not restarting: a final exit"))
      << launch.err();
  EXPECT_FALSE(contains(launch.out(), "incarnation=2")) << launch.out();
}

TEST(ClusterTest, LaunchRestartStopsWithoutARestartOnASignal) {
  LaunchDir dir;
  const std::string starts = dir.path("starts"), log = dir.path("restarts.log");
  // Process 1 counts the starts in $D/starts. With $FAIL 1 it then fails at once; otherwise
  // both run until they are stopped.
  const std::string script =
      "if [ \"$4\" = 1 ]; then echo start >> \"$D/starts\"; fi\n"
      "if [ \"$4\" = 1 ] && [ \"$FAIL\" = 1 ]; then exit 1; fi\n"
      "trap 'echo got TERM; exit 7' TERM\n"
      "echo ready\n"
      "while :; do sleep 0.05; done\n";
  {
    SCOPED_TRACE("during the backoff");
    // A backoff far longer than the deadline below: only the signal can end it in time.
    Process launch(
        supervise_script({"--restart", "--backoff", "120:120", "--restart-log", log}, script),
        {{"D", dir.path("")}, {"FAIL", "1"}});
    ASSERT_TRUE(launch.wait_for_error_output("restart 1 in ", seconds(20))) << launch.err();
    launch.signal(SIGTERM);
    ASSERT_EQ(launch.wait_for(seconds(20)), 128 + SIGTERM) << launch.err();
    EXPECT_EQ(lines_of(starts).size(), 1u) << "started again after SIGTERM";
    EXPECT_EQ(lines_of(log).size(), 1u);
  }
  std::filesystem::remove(starts);
  std::filesystem::remove(log);
  {
    SCOPED_TRACE("while running");
    Process launch(
        supervise_script({"--restart", "--backoff", "0.05:0.2", "--restart-log", log}, script),
        {{"D", dir.path("")}, {"FAIL", "0"}});
    ASSERT_TRUE(launch.wait_for_output("[0] ready", seconds(20))) << launch.err();
    ASSERT_TRUE(launch.wait_for_output("[1] ready", seconds(20))) << launch.err();
    launch.signal(SIGTERM);
    ASSERT_EQ(launch.wait_for(seconds(20)), 128 + SIGTERM) << launch.err();
    launch.drain();
    for (const std::string process : {"[0] ", "[1] "}) {
      EXPECT_TRUE(contains(launch.out(), process + "got TERM")) << launch.out();
    }
    EXPECT_EQ(lines_of(starts).size(), 1u) << "started again after SIGTERM";
    EXPECT_EQ(lines_of(log).size(), 0u);
    EXPECT_FALSE(contains(launch.err(), "restart")) << launch.err();
  }
}

TEST(ClusterTest, LaunchWithoutRestartLeavesTheIncarnationAlone) {
  const std::string script = "echo \"incarnation=${WEIR_INCARNATION-(unset)}\"\n";
  for (const std::string incarnation : {"", "5"}) {
    SCOPED_TRACE("$WEIR_INCARNATION: " + incarnation);
    std::vector<std::pair<std::string, std::string>> env;
    if (!incarnation.empty()) env.emplace_back("WEIR_INCARNATION", incarnation);
    Process launch(launch_script("2", script), env);
    ASSERT_EQ(launch.wait_for(seconds(20)), 0) << launch.err();
    launch.drain();
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_EQ(printed(launch.out(), p, "incarnation"),
                incarnation.empty() ? "(unset)" : incarnation)
          << launch.out();
    }
  }
}

TEST(ClusterTest, LaunchRefusesBadSupervisionFlags) {
  LaunchDir dir;
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--max-restarts", "2"},
                                             {"--backoff", "0.1:1"},
                                             {"--restart-log", dir.path("log")},
                                             {"--restart", "--backoff", "1"},
                                             {"--restart", "--backoff", "2:1"},
                                             {"--restart", "--backoff", "-1:1"},
                                             {"--restart", "--backoff", "x:1"},
                                             {"--restart", "--max-restarts", "-1"},
                                             {"--restart", "--restart-log", dir.path("no/log")}}) {
    std::string joined;
    for (const std::string& flag : flags) joined += flag + " ";
    SCOPED_TRACE(joined);
    Process launch(supervise_script(flags, "echo ran\n"));
    const auto code = launch.wait_for(seconds(20));
    ASSERT_TRUE(code.has_value());
    EXPECT_NE(*code, 0);
    launch.drain();
    EXPECT_FALSE(contains(launch.out(), "ran")) << "the program ran";
    EXPECT_FALSE(launch.err().empty());
  }
  // --restart sets the incarnation of each start in the environment, which --incarnation in
  // ARGS would override.
  std::vector<std::string> command = supervise_script({"--restart"}, "echo ran\n");
  command.emplace_back("--incarnation");
  command.emplace_back("3");
  Process launch(command);
  const auto code = launch.wait_for(seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  launch.drain();
  EXPECT_FALSE(contains(launch.out(), "ran")) << "the program ran";
  EXPECT_TRUE(contains(launch.err(), "--incarnation")) << launch.err();
}

}  // namespace
}  // namespace weir
