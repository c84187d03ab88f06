// Runs a throwaway-server script (tests/support/*/..._fixture.sh) from a test that manages its own
// server: start, stop, restart, ...

#pragma once

#include <cstdio>
#include <string>

#include <sys/wait.h>

namespace weir::testing {

// Runs `bash <script> <args>`. Empty on success; otherwise what the script printed and how it
// ended, for the test's failure message.
inline std::string run_fixture_script(const std::string& script, const std::string& args) {
  const std::string command = "bash " + script + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "could not run " + command;
  std::string output;
  char buffer[4096];
  for (size_t n = 0; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    output.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return command + " ended with status " + std::to_string(status) + ":\n" + output;
}

}  // namespace weir::testing
