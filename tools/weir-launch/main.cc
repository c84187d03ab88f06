// weir-launch -n N -w W [--] PROGRAM ARGS...: runs PROGRAM as a local cluster of N processes of
// W workers each, linked on loopback.
//
// It picks N free loopback ports, writes them to a hostfile in a fresh temporary directory, sets
// WEIR_CLUSTER_ID to a fresh random id, and starts process I as
//
//   PROGRAM ARGS... -n N -p I -h HOSTFILE -w W
//
// Every line a process prints (stdout or stderr) is forwarded to the same stream with the prefix
// "[I] ". When a process fails (non-zero exit or a signal), the others are stopped (SIGTERM,
// then SIGKILL after a grace period) and weir-launch exits with the first failure's code (128 +
// the signal for a signal); otherwise 0. SIGINT/SIGTERM to weir-launch are passed on.

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

// Between SIGTERM and SIGKILL when stopping the processes.
constexpr auto kStopGrace = std::chrono::seconds(3);

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
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
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

// One output stream of one process: bytes not yet forming a whole line.
struct Output {
  int fd = -1;
  size_t process = 0;
  FILE* to = nullptr;
  std::string partial;
};

// Forwards the complete lines in `out.partial` (all of it at end of stream) with the prefix.
void forward(Output& out, bool at_end) {
  size_t start = 0;
  for (size_t nl; (nl = out.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::fprintf(out.to, "[%zu] %.*s\n", out.process, static_cast<int>(nl - start),
                 out.partial.data() + start);
  }
  out.partial.erase(0, start);
  if (at_end && !out.partial.empty()) {
    std::fprintf(out.to, "[%zu] %s\n", out.process, out.partial.c_str());
    out.partial.clear();
  }
  std::fflush(out.to);
}

struct Child {
  pid_t pid = -1;
  bool running = false;
};

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct Options {
  size_t processes = 2;
  size_t workers = 1;
  std::vector<std::string> command;  // PROGRAM ARGS...
};

Options parse_options(int argc, char** argv) {
  CLI::App app{"weir-launch: runs a program as a local weir cluster on loopback"};
  Options options;
  app.add_option("-n,--processes", options.processes, "processes in the cluster (default 2)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-w,--workers", options.workers, "worker threads per process (default 1)")
      ->check(CLI::Range(1, 4096));
  app.prefix_command();  // Everything from PROGRAM on belongs to the program.
  app.footer(
      "Each process runs as: PROGRAM ARGS... -n N -p I -h HOSTFILE -w W, with WEIR_CLUSTER_ID set "
      "to a fresh id. Output lines are prefixed with [I]. Exits with the first failure's code.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));  // --help: 0 after the help text; a bad flag: its error.
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (options.command.empty()) {
    die("no program to run (usage: weir-launch -n N -w W [--] PROGRAM ARGS...)");
  }
  return options;
}

// Writes one loopback address per port to DIR/hostfile; returns its path.
std::string write_hostfile(const std::filesystem::path& dir, const std::vector<int>& ports) {
  const std::string hostfile = (dir / "hostfile").string();
  std::ofstream out(hostfile);
  for (int port : ports) out << "127.0.0.1:" << port << "\n";
  if (!out) die("cannot write " + hostfile);
  return hostfile;
}

// The processes of the cluster and their output streams (stdout and stderr of each).
struct Cluster {
  std::vector<Child> children;
  std::vector<Output> outputs;
};

// Starts process `index` of the cluster as PROGRAM ARGS... -n N -p I -h HOSTFILE -w W, its output
// read through pipes.
void spawn(const Options& options, size_t index, const std::string& hostfile,
           const std::string& cluster_id, Cluster& cluster) {
  const pid_t parent = ::getpid();
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) die("pipe failed");
  std::vector<std::string> args = options.command;
  for (const std::string& extra : {std::string("-n"), std::to_string(options.processes),
                                   std::string("-p"), std::to_string(index), std::string("-h"),
                                   hostfile, std::string("-w"), std::to_string(options.workers)}) {
    args.push_back(extra);
  }
  const pid_t pid = ::fork();
  if (pid < 0) die(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Die with weir-launch, whatever kills it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(1);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::setenv("WEIR_CLUSTER_ID", cluster_id.c_str(), 1);
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
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  cluster.children.push_back({pid, true});
  cluster.outputs.push_back({out_pipe[0], index, stdout, {}});
  cluster.outputs.push_back({err_pipe[0], index, stderr, {}});
}

// Forwards what the processes wrote, waiting up to `timeout_ms` for some. Returns false (at once)
// when every output stream has ended.
bool pump(std::vector<Output>& outputs, int timeout_ms) {
  std::vector<pollfd> fds;
  for (const Output& out : outputs) {
    if (out.fd >= 0) fds.push_back({out.fd, POLLIN, 0});
  }
  if (fds.empty()) return false;
  if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) die("poll failed");
  for (Output& out : outputs) {
    if (out.fd < 0) continue;
    for (const pollfd& p : fds) {
      if (p.fd != out.fd || p.revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(out.fd, buffer, sizeof(buffer));
      if (n > 0) {
        out.partial.append(buffer, static_cast<size_t>(n));
        forward(out, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        forward(out, true);
        ::close(out.fd);
        out.fd = -1;
      }
    }
  }
  return true;
}

// Forwards the processes' output until every process has exited and its output has ended. On the
// first failure, or a signal to weir-launch, stops the rest (SIGTERM, then SIGKILL after the
// grace period). Returns the first failure's exit code (128 + the signal for a signal), or 0.
int wait_all(Cluster& cluster) {
  int first_failure = 0;
  bool stopping = false;
  Clock::time_point kill_at;
  auto stop_all = [&] {
    if (stopping) return;
    stopping = true;
    kill_at = Clock::now() + kStopGrace;
    for (const Child& child : cluster.children) {
      if (child.running) ::kill(child.pid, SIGTERM);
    }
  };

  size_t running = cluster.children.size();
  for (;;) {
    if (const int sig = g_signal.exchange(0); sig != 0) {
      if (first_failure == 0) first_failure = 128 + sig;
      stop_all();
    }
    if (stopping && Clock::now() >= kill_at) {
      for (const Child& child : cluster.children) {
        if (child.running) ::kill(child.pid, SIGKILL);
      }
    }
    for (Child& child : cluster.children) {
      int status = 0;
      if (child.running && ::waitpid(child.pid, &status, WNOHANG) == child.pid) {
        child.running = false;
        --running;
        if (exit_code(status) != 0 && first_failure == 0) {
          first_failure = exit_code(status);
          stop_all();
        }
      }
    }
    const bool open = pump(cluster.outputs, 20);
    if (!open && running == 0) break;
    if (!open) ::usleep(20000);
  }
  return first_failure;
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

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const std::vector<int> ports = free_ports(options.processes);
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  std::string pattern = (ec ? std::filesystem::path("/tmp") : temp) / "weir-launch.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) die("cannot make a temporary directory");
  const std::filesystem::path dir = pattern;
  const std::string hostfile = write_hostfile(dir, ports);
  const std::string cluster_id = random_id();
  install_signal_handlers();

  Cluster cluster;
  for (size_t i = 0; i < options.processes; ++i) {
    spawn(options, i, hostfile, cluster_id, cluster);
  }
  const int code = wait_all(cluster);
  std::filesystem::remove_all(dir, ec);
  return code;
}
