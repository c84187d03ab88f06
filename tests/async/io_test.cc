// Async bodies that wait on sockets, pipes and blocking calls while the worker keeps running
// other dataflows.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/harness.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace weir {
namespace {

using namespace std::chrono_literals;
using Caps = std::span<CapabilitySet<uint64_t>>;
using testing::step_until;
using testing::Watchdog;

// A value one thread sets and others wait for.
class Stage {
 public:
  void advance_to(int stage) {
    {
      std::lock_guard lock(mu_);
      stage_ = stage;
    }
    cv_.notify_all();
  }
  void wait_for(int stage) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stage_ >= stage; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int stage_ = 0;
};

// The body waits for a socket another thread writes, then for a blocking call; the other thread
// writes, and the blocking call returns, only after a second dataflow on the same worker has made
// 50 rounds of progress during each wait.
TEST(AsyncIoTest, BodyWaitsOnASocketAndABlockingCallWhileAnotherDataflowRuns) {
  Watchdog watchdog("BodyWaitsOnASocketAndABlockingCall");
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  Stage stage;
  std::thread writer([&] {
    stage.wait_for(1);
    const char message[] = "hello";
    ASSERT_EQ(::write(fds[1], message, 5), 5);
  });

  std::atomic<int> body_state{0};  // 1: waiting on the socket; 2: in the blocking call; 3: done.
  auto result = testing::run_workers(1, [&](Worker& worker) {
    ProbeHandle<uint64_t> async_probe;
    std::vector<uint64_t> async_output;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Reader", scope);
      auto [out, stream] = builder.add_output<uint64_t>();
      builder.build([&, out](AsyncContext& ctx, Caps caps) mutable -> absl::Status {
        body_state = 1;
        std::string received;
        while (received.size() < 5) {
          if (absl::Status status = ctx.await_readable(fds[0]); !status.ok()) return status;
          char buffer[16];
          const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
          if (n > 0) received.append(buffer, static_cast<size_t>(n));
          if (n == 0) return absl::DataLossError("socket closed early");
        }
        body_state = 2;
        const uint64_t answer = ctx.run_blocking([&] {
          stage.wait_for(2);  // Blocks a pool thread, not the worker.
          return received.size() * 10;
        });
        body_state = 3;
        out.give(caps[0].first(), answer);
        return absl::OkStatus();
      });
      stream | inspect([&](const uint64_t& x) { async_output.push_back(x); }) |
          probe_with(async_probe);
    });

    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      stream | map([](uint64_t x) { return x + 1; }) | probe_with(probe);
      return std::move(handle);
    });

    uint64_t round = 0;
    auto make_rounds = [&](uint64_t n, int expected_state) {
      for (uint64_t i = 0; i < n; ++i) {
        input.send(round);
        input.advance_to(++round);
        EXPECT_TRUE(step_until(worker, [&] { return !probe.less_than(round); }));
        EXPECT_EQ(body_state.load(), expected_state) << "round " << round;
      }
    };
    EXPECT_TRUE(step_until(worker, [&] { return body_state.load() == 1; }));
    make_rounds(50, 1);  // The body waits on the socket.
    stage.advance_to(1);
    EXPECT_TRUE(step_until(worker, [&] { return body_state.load() == 2; }));
    make_rounds(50, 2);  // The body waits on the blocking call.
    stage.advance_to(2);
    EXPECT_TRUE(step_until(worker, [&] { return async_probe.done(); }));
    input.close();
    while (worker.step_or_park(1ms)) {
    }
    return std::pair(round, async_output);
  });
  stage.advance_to(2);
  writer.join();
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& [rounds, output] = (*result)[0];
  EXPECT_EQ(rounds, 100u);
  EXPECT_EQ(output, std::vector<uint64_t>{50});
  EXPECT_EQ(body_state.load(), 3);
}

// A full socket: the body waits until another thread drains it, then writes the rest.
TEST(AsyncIoTest, AwaitWritableWaitsForRoom) {
  Watchdog watchdog("AwaitWritableWaitsForRoom");
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  std::atomic<bool> full{false};
  std::atomic<size_t> drained{0};
  constexpr size_t kTotal = 4 << 20;
  std::thread reader([&] {
    while (!full.load()) std::this_thread::sleep_for(1ms);
    char buffer[65536];
    while (drained.load() < kTotal) {
      const ssize_t n = ::read(fds[1], buffer, sizeof(buffer));
      if (n > 0) {
        drained += static_cast<size_t>(n);
      } else {
        std::this_thread::sleep_for(100us);
      }
    }
  });
  auto result = testing::run_workers(1, [&](Worker& worker) {
    size_t waits = 0;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Writer", scope);
      builder.build([&](AsyncContext& ctx, Caps) -> absl::Status {
        std::vector<char> chunk(65536, 'x');
        size_t written = 0;
        while (written < kTotal) {
          const ssize_t n = ::write(fds[0], chunk.data(), std::min(chunk.size(), kTotal - written));
          if (n > 0) {
            written += static_cast<size_t>(n);
            continue;
          }
          if (errno != EAGAIN) return absl::InternalError("write failed");
          full = true;
          ++waits;
          if (absl::Status status = ctx.await_writable(fds[0]); !status.ok()) return status;
        }
        return absl::OkStatus();
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return waits;
  });
  full = true;
  reader.join();
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE((*result)[0], 1u);
  EXPECT_EQ(drained.load(), kTotal);
}

// -1 and a closed descriptor cannot be watched: INVALID_ARGUMENT naming the descriptor and the
// operator. A regular file is always ready.
TEST(AsyncIoTest, AwaitingABadDescriptorIsAnError) {
  // A number far above the ones in use, so that no open() reuses it during the test.
  const int closed = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 900);
  ASSERT_GE(closed, 900);
  ::close(closed);
  char path[] = "/tmp/weir-await-regular-XXXXXX";
  const int regular = ::mkstemp(path);
  ASSERT_GE(regular, 0);
  ::unlink(path);
  auto result = testing::run_workers(1, [&](Worker& worker) {
    std::vector<absl::Status> seen;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Bad", scope);
      builder.build([&](AsyncContext& ctx, Caps) {
        seen.push_back(ctx.await_readable(-1));
        seen.push_back(ctx.await_writable(closed));
        seen.push_back(ctx.await_readable(regular));
        seen.push_back(ctx.await_writable(regular));
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return seen;
  });
  ::close(regular);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<absl::Status>& seen = (*result)[0];
  ASSERT_EQ(seen.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    const std::string fd = std::to_string(i == 0 ? -1 : closed);
    EXPECT_EQ(seen[i].code(), absl::StatusCode::kInvalidArgument) << seen[i];
    EXPECT_NE(seen[i].message().find("file descriptor " + fd), std::string::npos) << seen[i];
    EXPECT_NE(seen[i].message().find("'Bad'"), std::string::npos) << seen[i];
  }
  EXPECT_TRUE(seen[2].ok()) << seen[2];
  EXPECT_TRUE(seen[3].ok()) << seen[3];
}

// Many bodies on several workers wait on their own pipes; each is woken by its own writer.
TEST(AsyncIoTest, ManyBodiesWaitOnTheirOwnPipes) {
  Watchdog watchdog("ManyBodiesWaitOnTheirOwnPipes");
  constexpr size_t kWorkers = 2;
  constexpr size_t kPerWorker = 8;
  std::vector<std::array<int, 2>> pipes(kWorkers * kPerWorker);
  for (auto& p : pipes) ASSERT_EQ(::pipe2(p.data(), O_NONBLOCK | O_CLOEXEC), 0);
  std::thread writer([&] {
    for (size_t i = pipes.size(); i-- > 0;) {
      const char byte = static_cast<char>('a' + i % 26);
      ASSERT_EQ(::write(pipes[i][1], &byte, 1), 1);
      std::this_thread::sleep_for(200us);
    }
  });
  auto result = testing::run_workers(kWorkers, [&](Worker& worker) {
    std::string seen(kPerWorker, '?');
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      for (size_t k = 0; k < kPerWorker; ++k) {
        AsyncOperatorBuilder<uint64_t> builder("Pipe" + std::to_string(k), scope);
        const int fd = pipes[worker.index() * kPerWorker + k][0];
        builder.build([&, fd, k](AsyncContext& ctx, Caps) -> absl::Status {
          for (;;) {
            if (absl::Status s = ctx.await_readable(fd); !s.ok()) return s;
            char byte;
            if (::read(fd, &byte, 1) == 1) {
              seen[k] = byte;
              return absl::OkStatus();
            }
          }
        });
      }
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return seen;
  });
  writer.join();
  for (auto& p : pipes) {
    ::close(p[0]);
    ::close(p[1]);
  }
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t w = 0; w < kWorkers; ++w) {
    for (size_t k = 0; k < kPerWorker; ++k) {
      EXPECT_EQ((*result)[w][k], static_cast<char>('a' + (w * kPerWorker + k) % 26));
    }
  }
}

// run_blocking hands back the function's exception on the fiber, where the body may catch it.
TEST(AsyncIoTest, RunBlockingRethrowsOnTheFiber) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::string caught;
    int value = 0;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Blocking", scope);
      builder.build([&](AsyncContext& ctx, Caps) {
        try {
          ctx.run_blocking([]() -> int { throw std::runtime_error("query failed"); });
        } catch (const std::runtime_error& e) {
          caught = e.what();
        }
        value = ctx.run_blocking([] { return 41; }) + 1;
        ctx.run_blocking([] {});
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return std::pair(caught, value);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)[0].first, "query failed");
  EXPECT_EQ((*result)[0].second, 42);
}

}  // namespace
}  // namespace weir
