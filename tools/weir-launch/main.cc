// weir-launch -n N -w W [--] PROGRAM ARGS...: runs PROGRAM as a local cluster of N processes of
// W workers each, linked on loopback.
//
// It picks N free loopback ports, writes them to a hostfile in a fresh temporary directory, sets
// WEIR_CLUSTER_ID to a fresh random id and WEIR_CLUSTER_SECRET to a fresh secret (32 random
// bytes, hex-encoded; unless the user gave a secret: a non-empty $WEIR_CLUSTER_SECRET or
// $WEIR_CLUSTER_SECRET_FILE, or --cluster-secret-file in ARGS), and starts process I as
//
//   PROGRAM ARGS... -n N -p I -h HOSTFILE -w W
//
// in a process group of its own, with "{p}" in the values of --tls-cert and --tls-key in ARGS
// replaced by I (per-process certificates, each naming its process index).
//
// Every line a process prints (stdout or stderr) is forwarded to the same stream with the prefix
// "[I] ". When a process fails (non-zero exit or a signal), the others are stopped (SIGTERM to each
// process group, then SIGKILL after a grace period) and weir-launch exits with the first failure's
// code (128 + the signal for a signal); otherwise 0. SIGINT, SIGTERM and SIGHUP to weir-launch are
// passed on to every process group as they came (then SIGKILL after the grace period), and
// weir-launch exits with 128 + that signal. Once every process has exited, what is left of their
// groups is stopped the same way, and weir-launch exits as soon as the groups are empty: it does
// not wait for output streams that something outside the groups still holds open.
//
// Ports are picked by binding port 0 and released before the processes start (a weir process
// listens on its own; it cannot take a listening socket from us). If one is taken in between and
// the first process to fail says it cannot listen on its address, the whole cluster is started
// again on new ports, up to kMaxStarts times in all.
//
// Supervision (off unless --restart is given; without it all of the above holds as it stands):
//
//   --restart              when a process fails, stop the rest as above, wait a backoff, and
//                          start all N processes again (fresh ports, cluster id and secret). A
//                          clean end (every process exits 0) ends weir-launch with 0; a signal to
//                          weir-launch, while the cluster runs or during the backoff, stops
//                          everything without a restart (128 + the signal, as above).
//   --max-restarts K       give up after K restarts in a row, with the last failure's code
//                          (default: no limit). A cluster that stayed up kStableRun (60 s) before
//                          it failed starts the count, and the backoff, afresh.
//   --backoff MIN:MAX      seconds (default 0.1:30; at most kMostBackoff, a day). Restart k
//                          waits a random time in [b, 2b], b = MIN * 2^(k-1), both ends capped
//                          at MAX: the waits grow, jittered.
//   --final-exit CODE      a process that exits with CODE is not restarted: weir-launch stops the
//                          rest and exits with CODE (repeatable). `weir replica` exits 3 when a
//                          newer execution fenced it: `--final-exit 3` keeps two supervised
//                          replicas of one catalog from fencing each other in turn.
//   --restart-log FILE     append one JSON line per restart: {"time": RFC 3339 UTC, "process": I,
//                          "exit": code or null, "signal": "SIGNAME" (or its number) or null,
//                          "backoff_s": x, "restart": k, "incarnation": n}.
//
// With --restart every start of the cluster (a restart, or a start again on new ports) gets
// WEIR_INCARNATION one higher than the start before: 1 for the first, or the user's
// $WEIR_INCARNATION. (So --incarnation in ARGS, which a weir process prefers, is refused.) Each
// restart is also told on stderr: "weir-launch: process I exited with code C; restart k in X s".

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

// Between SIGTERM and SIGKILL when stopping the processes.
constexpr auto kStopGrace = std::chrono::seconds(3);

// Starts of the cluster, in all, when a picked port is taken before its process listens.
constexpr int kMaxStarts = 3;

// What a weir process prints when it cannot listen on its hostfile address, followed by the
// address (protocol/src/grpc_transport.cc). The launch tests fail if the two drift apart.
constexpr std::string_view kCannotListen = "cannot listen on ";

// With --restart: a cluster that stayed up this long before a process failed was healthy, and its
// failure starts the restart count (and so the backoff) afresh.
constexpr auto kStableRun = std::chrono::seconds(60);

// --backoff's default, and the most it takes, in seconds.
constexpr double kDefaultBackoffMin = 0.1;
constexpr double kDefaultBackoffMax = 30;
constexpr double kMostBackoff = 24 * 60 * 60;

std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal.store(sig); }

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "weir-launch: %s\n", message.c_str());
  std::exit(2);
}

// Free TCP ports on 127.0.0.1, distinct (all sockets are open while the ports are chosen).
std::vector<int> free_ports(size_t n) {
  std::vector<int> sockets, ports;
  for (size_t i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      die(std::string("cannot find a free loopback port: ") + std::strerror(errno));
    }
    sockets.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : sockets) ::close(fd);
  return ports;
}

std::string random_id() {
  std::random_device device;
  std::string id = "launch-";
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) id.push_back(kHex[device() % 16]);
  return id;
}

// Bytes of a generated cluster secret (hex-encoded: twice as many characters); the runtime needs
// at least 16.
constexpr size_t kSecretBytes = 32;

// Fills `out` from the kernel's random source: getrandom, or /dev/urandom where the system call
// is missing or filtered (old kernels, some sandboxes).
void random_bytes(std::span<unsigned char> out) {
  size_t filled = 0;
  while (filled < out.size()) {
    const ssize_t n = ::getrandom(out.data() + filled, out.size() - filled, 0);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
      break;
    } else {
      die(std::string("getrandom: ") + std::strerror(errno));
    }
  }
  if (filled == out.size()) return;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(std::string("cannot open /dev/urandom: ") + std::strerror(errno));
  while (filled < out.size()) {
    const ssize_t n = ::read(fd, out.data() + filled, out.size() - filled);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (!(n < 0 && errno == EINTR)) {
      die("cannot read /dev/urandom: " +
          std::string(n == 0 ? "end of file" : std::strerror(errno)));
    }
  }
  ::close(fd);
}

// A fresh cluster secret: kSecretBytes random bytes, hex-encoded (printable, so that it can live
// in the environment).
std::string random_secret() {
  std::array<unsigned char, kSecretBytes> bytes{};
  random_bytes(bytes);
  static const char kHex[] = "0123456789abcdef";
  std::string secret;
  secret.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    secret.push_back(kHex[b >> 4]);
    secret.push_back(kHex[b & 0xf]);
  }
  return secret;
}

// True if `name` is set in our environment to something other than the empty string (which the
// runtime reads as "no secret").
bool is_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// PROGRAM ARGS... as process `index` runs them: "{p}" in the value of --tls-cert and --tls-key
// (as FLAG VALUE or FLAG=VALUE, the forms weir::Config::from_args reads) replaced by `index`, so
// that one command line gives each process its own certificate. PROGRAM itself is left alone.
// (A value that is itself one of these flags, as in `--cluster-id --tls-cert`, is not told
// apart: the flags are found by name wherever they are.)
std::vector<std::string> process_command(const std::vector<std::string>& command, size_t index) {
  const std::string p = std::to_string(index);
  // Replaces every "{p}" in `arg` from `from` on.
  const auto substitute = [&](std::string& arg, size_t from) {
    for (size_t at = from; (at = arg.find("{p}", at)) != std::string::npos; at += p.size()) {
      arg.replace(at, 3, p);
    }
  };
  std::vector<std::string> args = command;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--tls-cert" || arg == "--tls-key") {
      if (i + 1 < args.size()) substitute(args[++i], 0);
    } else if (arg.rfind("--tls-cert=", 0) == 0 || arg.rfind("--tls-key=", 0) == 0) {
      substitute(arg, arg.find('=') + 1);
    }
  }
  return args;
}

// True if ARGS give the processes a secret file (--cluster-secret-file FILE or =FILE, not empty).
bool has_secret_file_flag(const std::vector<std::string>& command) {
  for (size_t i = 1; i < command.size(); ++i) {
    if (command[i] == "--cluster-secret-file" && i + 1 < command.size() &&
        !command[i + 1].empty()) {
      return true;
    }
    if (command[i].rfind("--cluster-secret-file=", 0) == 0 &&
        command[i].size() > std::string_view("--cluster-secret-file=").size()) {
      return true;
    }
  }
  return false;
}

// One output stream of one process: bytes not yet forming a whole line.
struct Output {
  int fd = -1;
  size_t process = 0;
  FILE* to = nullptr;
  std::string partial;
};

// One process of the cluster. Its pid is also its process group's id.
struct Child {
  pid_t pid = -1;
  std::string address;            // Its line in the hostfile.
  bool running = false;           // Not yet reaped.
  bool group_open = true;         // Its process group may still have members.
  bool could_not_listen = false;  // It said it cannot listen on `address`.
};

// Forwards the complete lines in `out.partial` (all of it at end of stream) with the prefix, and
// notes whether `child` (the writer) says it cannot listen on its address.
void forward(Output& out, bool at_end, Child& child) {
  const std::string cannot_listen = std::string(kCannotListen) + child.address;
  const auto note = [&](std::string_view line) {
    if (line.find(cannot_listen) != std::string_view::npos) child.could_not_listen = true;
  };
  size_t start = 0;
  for (size_t nl; (nl = out.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::fprintf(out.to, "[%zu] %.*s\n", out.process, static_cast<int>(nl - start),
                 out.partial.data() + start);
    note(std::string_view(out.partial).substr(start, nl - start));
  }
  out.partial.erase(0, start);
  if (at_end && !out.partial.empty()) {
    std::fprintf(out.to, "[%zu] %s\n", out.process, out.partial.c_str());
    note(out.partial);
    out.partial.clear();
  }
  std::fflush(out.to);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct Options {
  size_t processes = 2;
  size_t workers = 1;
  std::vector<std::string> command;  // PROGRAM ARGS...
  // Supervision (--restart and the flags that go with it).
  bool restart = false;
  std::optional<uint64_t> max_restarts;  // No limit if unset.
  double backoff_min = kDefaultBackoffMin;
  double backoff_max = kDefaultBackoffMax;
  std::string restart_log;  // Empty: none.
  // Exit codes after which a process is not restarted: weir-launch ends with the code.
  std::vector<int> final_exits;
};

// Parses --backoff's MIN:MAX (seconds, 0 <= MIN <= MAX <= kMostBackoff) into `options`; false if
// it is not that.
bool parse_backoff(const std::string& text, Options& options) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  const auto seconds = [](std::string_view part, double& out) {
    const char* end = part.data() + part.size();
    const auto [ptr, ec] = std::from_chars(part.data(), end, out);
    return ec == std::errc() && ptr == end && out >= 0 && out <= kMostBackoff;
  };
  const std::string_view all(text);
  return seconds(all.substr(0, colon), options.backoff_min) &&
         seconds(all.substr(colon + 1), options.backoff_max) &&
         options.backoff_min <= options.backoff_max;
}

// True if ARGS give the processes an incarnation (--incarnation N or =N).
bool has_incarnation_flag(const std::vector<std::string>& command) {
  for (size_t i = 1; i < command.size(); ++i) {
    if (command[i] == "--incarnation" || command[i].rfind("--incarnation=", 0) == 0) return true;
  }
  return false;
}

Options parse_options(int argc, char** argv) {
  CLI::App app{"weir-launch: runs a program as a local weir cluster on loopback"};
  Options options;
  app.add_option("-n,--processes", options.processes, "processes in the cluster (default 2)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-w,--workers", options.workers, "worker threads per process (default 1)")
      ->check(CLI::Range(1, 4096));
  CLI::Option* restart =
      app.add_flag("--restart", options.restart,
                   "when a process fails, stop the rest and start the cluster again after a "
                   "backoff, with $WEIR_INCARNATION one higher");
  uint64_t max_restarts = 0;
  app.add_option("--max-restarts", max_restarts,
                 "with --restart: give up after K restarts in a row, with the last failure's "
                 "code (default: no limit)")
      ->type_name("K")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 62))
      ->needs(restart);
  std::string backoff;
  app.add_option("--backoff", backoff,
                 "with --restart: MIN:MAX seconds to wait before a restart, doubling from MIN "
                 "up to MAX, jittered (default 0.1:30)")
      ->type_name("MIN:MAX")
      ->needs(restart);
  app.add_option("--restart-log", options.restart_log,
                 "with --restart: append a JSON line per restart to FILE")
      ->type_name("FILE")
      ->needs(restart);
  app.add_option("--final-exit", options.final_exits,
                 "with --restart: a process that exits with CODE is not restarted; weir-launch "
                 "stops the rest and exits with CODE (repeat for several; `weir replica` exits 3 "
                 "when a newer replica fenced it)")
      ->type_name("CODE")
      ->check(CLI::Range(1, 255))
      ->needs(restart);
  app.prefix_command();  // Everything from PROGRAM on belongs to the program.
  app.footer(
      "Each process runs as: PROGRAM ARGS... -n N -p I -h HOSTFILE -w W, with WEIR_CLUSTER_ID set "
      "to a fresh id and WEIR_CLUSTER_SECRET to a fresh secret (unless $WEIR_CLUSTER_SECRET, "
      "$WEIR_CLUSTER_SECRET_FILE or --cluster-secret-file gives one), and {p} in the values of "
      "--tls-cert and --tls-key replaced by I. Output lines are prefixed with [I]. Exits with the "
      "first failure's code; with --restart, starts the cluster again instead (WEIR_INCARNATION "
      "1, 2, ... or from $WEIR_INCARNATION), until every process exits 0, a signal comes or "
      "--max-restarts is reached.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));  // --help: 0 after the help text; a bad flag: its error.
  }
  if (app.count("--max-restarts") > 0) options.max_restarts = max_restarts;
  if (app.count("--backoff") > 0 && !parse_backoff(backoff, options)) {
    die("--backoff expects MIN:MAX in seconds, 0 <= MIN <= MAX <= " +
        std::to_string(static_cast<int>(kMostBackoff)) + " (as in 0.1:30), got '" + backoff + "'");
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (options.command.empty()) {
    die("no program to run (usage: weir-launch -n N -w W [--] PROGRAM ARGS...)");
  }
  if (options.restart && has_incarnation_flag(options.command)) {
    die("--incarnation in ARGS would override the incarnation --restart gives each start in "
        "$WEIR_INCARNATION; set $WEIR_INCARNATION instead to choose the first start's");
  }
  return options;
}

// Writes `addresses`, one a line, to DIR/hostfile; returns its path.
std::string write_hostfile(const std::filesystem::path& dir,
                           const std::vector<std::string>& addresses) {
  std::string hostfile = (dir / "hostfile").string();
  std::ofstream out(hostfile);
  for (const std::string& address : addresses) out << address << "\n";
  if (!out) die("cannot write " + hostfile);
  return hostfile;
}

// The processes of the cluster and their output streams (stdout and stderr of each).
struct Cluster {
  std::vector<Child> children;
  std::vector<Output> outputs;
};

// What every process of one start of the cluster shares.
struct Membership {
  std::string hostfile;
  std::string cluster_id;
  std::string secret;  // Empty: the user gave the secret; the processes inherit it.
  // $WEIR_INCARNATION for the processes (with --restart); empty: left as it is.
  std::string incarnation;
};

// Starts process `index` of the cluster as PROGRAM ARGS... -n N -p I -h HOSTFILE -w W, in a
// process group of its own, its output read through pipes.
void spawn(const Options& options, size_t index, const std::string& address,
           const Membership& membership, Cluster& cluster) {
  const pid_t parent = ::getpid();
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) die("pipe failed");
  std::vector<std::string> args = process_command(options.command, index);
  for (const std::string& extra :
       {std::string("-n"), std::to_string(options.processes), std::string("-p"),
        std::to_string(index), std::string("-h"), membership.hostfile, std::string("-w"),
        std::to_string(options.workers)}) {
    args.push_back(extra);
  }
  const pid_t pid = ::fork();
  if (pid < 0) die(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Die with weir-launch, whatever kills it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(1);
    // Its own group, so that stopping it reaches what it started. (Set here and in the parent,
    // so that it holds before either goes on.)
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::setenv("WEIR_CLUSTER_ID", membership.cluster_id.c_str(), 1);
    // In the environment, not in argv: every user of the host can read a command line (ps), only
    // the process's own user its environment.
    if (!membership.secret.empty()) ::setenv("WEIR_CLUSTER_SECRET", membership.secret.c_str(), 1);
    if (!membership.incarnation.empty()) {
      ::setenv("WEIR_INCARNATION", membership.incarnation.c_str(), 1);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaction(sig, &dfl, nullptr);
    std::vector<char*> argv_child;
    argv_child.reserve(args.size() + 1);
    for (std::string& a : args) argv_child.push_back(a.data());
    argv_child.push_back(nullptr);
    ::execvp(argv_child[0], argv_child.data());
    std::fprintf(stderr, "weir-launch: cannot run %s: %s\n", argv_child[0], std::strerror(errno));
    _exit(127);
  }
  ::setpgid(pid, pid);  // EACCES once the child has run exec: it has done this itself by then.
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  cluster.children.push_back({pid, address, true});
  cluster.outputs.push_back({out_pipe[0], index, stdout, {}});
  cluster.outputs.push_back({err_pipe[0], index, stderr, {}});
}

// Sends `sig` to every process group that may still have members (0: only finds out). Returns
// true if some group had members.
bool signal_groups(Cluster& cluster, int sig) {
  bool any = false;
  for (Child& child : cluster.children) {
    if (!child.group_open) continue;
    if (::kill(-child.pid, sig) == 0) {
      any = true;
    } else if (errno == ESRCH) {
      // Empty: never signalled again, since its id may be reused.
      child.group_open = false;
    }
  }
  return any;
}

// Forwards the rest of `out` (a last line without a newline) and closes it.
void close_output(Output& out, Child& child) {
  forward(out, true, child);
  ::close(out.fd);
  out.fd = -1;
}

// Reads once from `out` and forwards the whole lines; at the end of the stream (or on an error)
// closes it. Returns true if it read something.
bool read_output(Output& out, Child& child) {
  char buffer[65536];
  ssize_t n;
  do {
    n = ::read(out.fd, buffer, sizeof(buffer));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    out.partial.append(buffer, static_cast<size_t>(n));
    forward(out, false, child);
    return true;
  }
  if (n < 0 && errno == EAGAIN) return false;
  close_output(out, child);
  return false;
}

// Forwards what the processes wrote, waiting up to `timeout_ms` for some. Returns false (at once)
// when every output stream has ended.
bool pump(Cluster& cluster, int timeout_ms) {
  std::vector<pollfd> fds;
  for (const Output& out : cluster.outputs) {
    if (out.fd >= 0) fds.push_back({out.fd, POLLIN, 0});
  }
  if (fds.empty()) return false;
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) die("poll failed");
  for (Output& out : cluster.outputs) {
    if (out.fd < 0) continue;
    for (const pollfd& p : fds) {
      if (p.fd == out.fd && p.revents != 0) read_output(out, cluster.children[out.process]);
    }
  }
  return true;
}

// Forwards what is left in the output streams, without waiting for more, and closes them. (Once
// every process group is empty, whatever still holds a stream open has left the groups.)
void drain(Cluster& cluster) {
  for (Output& out : cluster.outputs) {
    if (out.fd < 0) continue;
    ::fcntl(out.fd, F_SETFL, ::fcntl(out.fd, F_GETFL) | O_NONBLOCK);
    Child& child = cluster.children[out.process];
    while (read_output(out, child)) {
    }
    if (out.fd >= 0) close_output(out, child);
  }
}

struct Outcome {
  int code = 0;  // The first failure's exit code (128 + the signal for a signal), or 0.
  // The process that failed first, because its port was taken (and no signal came).
  std::optional<size_t> port_taken;
  int signal = 0;  // The first signal weir-launch got while the cluster ran, or 0.
  // The process that failed first, its wait status, and when weir-launch saw it.
  std::optional<size_t> failed;
  int failed_status = 0;
  Clock::time_point failed_at;
};

// Forwards the processes' output until every process has exited and its process group is empty.
// On the first failure stops the rest (SIGTERM to every group, then SIGKILL after the grace
// period); a signal to weir-launch is passed on as it came, then SIGKILL after the grace period.
Outcome wait_all(Cluster& cluster) {
  Outcome outcome;
  std::optional<Clock::time_point> kill_at;
  const auto stop = [&](int sig) {
    if (!kill_at) kill_at = Clock::now() + kStopGrace;
    signal_groups(cluster, sig);
  };

  size_t running = cluster.children.size();
  for (;;) {
    if (const int sig = g_signal.exchange(0); sig != 0) {
      if (outcome.code == 0) outcome.code = 128 + sig;
      if (outcome.signal == 0) outcome.signal = sig;
      stop(sig);
    }
    if (kill_at && Clock::now() >= *kill_at) signal_groups(cluster, SIGKILL);
    // weir-launch is the subreaper of its processes' descendants: reap whatever has exited.
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      for (size_t i = 0; i < cluster.children.size(); ++i) {
        Child& child = cluster.children[i];
        if (child.pid != pid || !child.running) continue;
        child.running = false;
        --running;
        if (exit_code(status) != 0 && outcome.code == 0) {
          outcome.code = exit_code(status);
          outcome.failed = i;
          outcome.failed_status = status;
          outcome.failed_at = Clock::now();
          stop(SIGTERM);
        }
      }
    }
    if (running == 0) {
      if (!signal_groups(cluster, 0)) break;
      // Whatever they started and left running goes the same way.
      if (!kill_at) stop(SIGTERM);
      // Members that even SIGKILL does not end (or that are not ours to reap): not waited for.
      if (Clock::now() >= *kill_at + kStopGrace) break;
    }
    if (!pump(cluster, 20)) ::usleep(20000);
  }
  drain(cluster);
  if (outcome.failed && outcome.signal == 0 && cluster.children[*outcome.failed].could_not_listen) {
    outcome.port_taken = outcome.failed;
  }
  return outcome;
}

// weir-launch may inherit an ignored SIGCHLD (then the kernel reaps its children and waitpid
// fails) and blocked signals through exec: it needs neither.
void reset_inherited_signals() {
  ::signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

// ---- Supervision (--restart) ----

// `sig` by name ("SIGTERM"), or its number where it is not one of these.
std::string signal_name(int sig) {
  static constexpr std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
  for (const auto& [number, name] : kNames) {
    if (number == sig) return name;
  }
  return std::to_string(sig);
}

// How a process with wait status `status` ended, as in "process 1 exited with code 3".
std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return "exited with signal " + signal_name(WTERMSIG(status));
  return "exited with code " + std::to_string(exit_code(status));
}

// The wait before restart `k` (1 for the first after a stable run), in seconds: random in
// [b, 2b], b = MIN * 2^(k-1), both ends capped at MAX; so it never shrinks from one restart to
// the next. Rounded to milliseconds, as it is logged.
double backoff_seconds(const Options& options, uint64_t k, std::mt19937_64& random) {
  const int doublings = static_cast<int>(std::min<uint64_t>(k - 1, 64));
  const double low = std::min(options.backoff_max, std::ldexp(options.backoff_min, doublings));
  const double high = std::min(options.backoff_max, 2 * low);
  const double wait = std::uniform_real_distribution<double>(low, high)(random);
  return std::clamp(std::round(wait * 1000) / 1000, low, high);
}

// Waits `seconds`, or until a signal comes to weir-launch: returns that signal, or 0.
int wait_backoff(double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  for (;;) {
    if (const int sig = g_signal.exchange(0); sig != 0) return sig;
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    // A signal cuts the sleep short (the handlers are installed without SA_RESTART); the cap
    // bounds the delay for one that comes between the check above and the sleep.
    const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::min<Clock::duration>(left, std::chrono::milliseconds(20)));
    const timespec nap{0, static_cast<long>(nanos.count())};
    ::nanosleep(&nap, nullptr);
  }
}

// Now, as RFC 3339 in UTC with milliseconds: "2024-05-01T12:34:56.789Z".
std::string utc_now() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  ::gmtime_r(&now.tv_sec, &utc);
  char seconds[32];
  std::strftime(seconds, sizeof(seconds), "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03ldZ", seconds, now.tv_nsec / 1000000);
  return out;
}

// Opens `file` to append to it (creating it); -1 with errno set if it cannot.
int open_log(const std::string& file) {
  return ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

// Appends `line` and a newline to the restart log `file`, opened for each line so that the log
// may be moved away while weir-launch runs. A log that cannot be written is told on stderr; the
// cluster is restarted all the same.
void append_to_log(const std::string& file, const std::string& line) {
  const int fd = open_log(file);
  if (fd < 0) {
    std::fprintf(stderr, "weir-launch: cannot open the restart log %s: %s\n", file.c_str(),
                 std::strerror(errno));
    return;
  }
  const std::string data = line + "\n";
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "weir-launch: cannot write the restart log %s: %s\n", file.c_str(),
                   n < 0 ? std::strerror(errno) : "nothing written");
      break;
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
}

// The restart log's line for a restart: process `process` ended with wait status `status`.
std::string restart_record(size_t process, int status, double backoff, uint64_t restart,
                           uint64_t incarnation) {
  // JSON values: a number, a string or null.
  const std::string exit_value = WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "null";
  std::string signal_value = "null";
  if (WIFSIGNALED(status)) {
    signal_value = signal_name(WTERMSIG(status));
    if (signal_value.rfind("SIG", 0) == 0) signal_value = "\"" + signal_value + "\"";
  }
  char backoff_s[32];
  std::snprintf(backoff_s, sizeof(backoff_s), "%.3f", backoff);
  return "{\"time\": \"" + utc_now() + "\", \"process\": " + std::to_string(process) +
         ", \"exit\": " + exit_value + ", \"signal\": " + signal_value +
         ", \"backoff_s\": " + backoff_s + ", \"restart\": " + std::to_string(restart) +
         ", \"incarnation\": " + std::to_string(incarnation) + "}";
}

// The first start's incarnation with --restart: the user's $WEIR_INCARNATION, or 1.
uint64_t first_incarnation() {
  if (!is_set("WEIR_INCARNATION")) return 1;
  const std::string_view text = std::getenv("WEIR_INCARNATION");
  uint64_t incarnation = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), incarnation);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    die("$WEIR_INCARNATION must be a non-negative integer, got '" + std::string(text) + "'");
  }
  return incarnation;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  reset_inherited_signals();
  install_signal_handlers();
  // Orphaned descendants of the processes come to weir-launch (not to init), so that it can reap
  // them and see their process groups empty.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    die(std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno));
  }
  if (!options.restart_log.empty()) {
    const int fd = open_log(options.restart_log);
    if (fd < 0) {
      die("cannot open the restart log " + options.restart_log + ": " + std::strerror(errno));
    }
    ::close(fd);
  }
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  std::string pattern = (ec ? std::filesystem::path("/tmp") : temp) / "weir-launch.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) die("cannot make a temporary directory");
  const std::filesystem::path dir = pattern;

  // A secret the user gave is the user's to share with processes started elsewhere; one made
  // here is known only to this start's processes. (Adding ours to one in a file would give the
  // processes two, which they refuse.)
  const bool user_secret = is_set("WEIR_CLUSTER_SECRET") || is_set("WEIR_CLUSTER_SECRET_FILE") ||
                           has_secret_file_flag(options.command);
  // Supervision: the next start's incarnation, the restarts in a row so far (since the last
  // start that stayed up kStableRun), and the backoff's jitter.
  uint64_t incarnation = options.restart ? first_incarnation() : 0;
  uint64_t restarts = 0;
  std::mt19937_64 jitter(std::random_device{}());
  Outcome outcome;
  // `start` counts the starts on new ports after a port was taken (up to kMaxStarts); a restart
  // after a failure begins that count again.
  for (int start = 1;; ++start) {
    std::vector<std::string> addresses;
    for (int port : free_ports(options.processes)) {
      addresses.push_back("127.0.0.1:" + std::to_string(port));
    }
    // A fresh id and secret per start: a process left over from a start before cannot join this
    // one.
    const Membership membership{write_hostfile(dir, addresses), random_id(),
                                user_secret ? std::string() : random_secret(),
                                options.restart ? std::to_string(incarnation) : std::string()};
    const Clock::time_point started = Clock::now();
    Cluster cluster;
    for (size_t i = 0; i < options.processes; ++i) {
      spawn(options, i, addresses[i], membership, cluster);
    }
    outcome = wait_all(cluster);
    ++incarnation;  // The next start's (used only with --restart).
    if (outcome.port_taken && start < kMaxStarts) {
      std::fprintf(stderr,
                   "weir-launch: process %zu could not listen on %s: the port was taken after "
                   "weir-launch picked it; starting the cluster again on new ports (start %d of "
                   "%d)\n",
                   *outcome.port_taken, addresses[*outcome.port_taken].c_str(), start + 1,
                   kMaxStarts);
      continue;
    }
    // Without --restart, or after a clean end or a signal, this start's outcome is the end.
    if (!options.restart || !outcome.failed || outcome.signal != 0) break;

    // A process failed: restart, unless its exit is final or --max-restarts says no more.
    if (outcome.failed_at - started >= kStableRun) restarts = 0;
    const size_t process = *outcome.failed;
    const std::string how = how_it_ended(outcome.failed_status);
    if (WIFEXITED(outcome.failed_status) &&
        std::find(options.final_exits.begin(), options.final_exits.end(),
                  WEXITSTATUS(outcome.failed_status)) != options.final_exits.end()) {
      std::fprintf(stderr,
                   "weir-launch: process %zu %s; not restarting: a final exit (--final-exit)\n",
                   process, how.c_str());
      break;
    }
    if (options.max_restarts && restarts >= *options.max_restarts) {
      std::fprintf(stderr,
                   "weir-launch: process %zu %s; not restarting: --max-restarts %llu reached\n",
                   process, how.c_str(), static_cast<unsigned long long>(*options.max_restarts));
      break;
    }
    ++restarts;
    const double backoff = backoff_seconds(options, restarts, jitter);
    std::fprintf(stderr, "weir-launch: process %zu %s; restart %llu in %.3f s\n", process,
                 how.c_str(), static_cast<unsigned long long>(restarts), backoff);
    if (!options.restart_log.empty()) {
      append_to_log(options.restart_log,
                    restart_record(process, outcome.failed_status, backoff, restarts, incarnation));
    }
    if (const int sig = wait_backoff(backoff); sig != 0) {
      outcome.code = 128 + sig;
      break;
    }
    start = 0;
  }
  std::filesystem::remove_all(dir, ec);
  return outcome.code;
}
