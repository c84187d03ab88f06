// Child: a child process with its stdin and stdout on pipes, for the integration tests.

#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace weir::persist::testing {

class Child {
 public:
  // Starts `argv` (argv[0] is the program path). Its stderr goes to ours.
  explicit Child(const std::vector<std::string>& argv) {
    int in[2];
    int out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
      std::perror("pipe2");
      std::abort();
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<char*> args;
    for (const std::string& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) {
      std::perror("posix_spawn");
      std::abort();
    }
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    stdin_ = fdopen(in[1], "w");
    stdout_ = fdopen(out[0], "r");
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(SIGKILL);
      wait();
    }
    if (stdin_ != nullptr) {
      std::fclose(stdin_);
    }
    std::fclose(stdout_);
  }

  void write_line(const std::string& line) {
    std::fputs((line + "\n").c_str(), stdin_);
    std::fflush(stdin_);
  }

  // Closes the child's stdin.
  void close_stdin() {
    std::fclose(stdin_);
    stdin_ = nullptr;
  }

  // The next line of the child's stdout without its newline; nullopt at EOF.
  std::optional<std::string> read_line() {
    std::string line;
    int c;
    while ((c = std::fgetc(stdout_)) != EOF && c != '\n') {
      line.push_back(static_cast<char>(c));
    }
    if (c == EOF && line.empty()) {
      return std::nullopt;
    }
    return line;
  }

  void kill(int signal) { ::kill(pid_, signal); }

  // Waits for the child to end; its wait status.
  int wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* stdin_ = nullptr;
  FILE* stdout_ = nullptr;
};

}  // namespace weir::persist::testing
