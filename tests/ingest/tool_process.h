// Running the `weir` tool from tests: start it with its output in files, wait for it, read what
// it wrote.

#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace weir::ingest::testing {

// Starts `args` (args[0] is the binary) with stdout in `out` and stderr in `err` (the same file
// if `err` is empty), appended to; returns its pid.
inline pid_t spawn_tool(const std::vector<std::string>& args, const std::filesystem::path& out,
                        const std::filesystem::path& err = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int err_fd =
        err.empty() ? out_fd : open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Runs `args` to completion with its output in `log`; its exit status (-1 if a signal ended it).
inline int run_tool(const std::vector<std::string>& args, const std::filesystem::path& log) {
  const pid_t pid = spawn_tool(args, log);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace weir::ingest::testing
