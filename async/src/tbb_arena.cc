#include "tbb_arena.h"

#include <cstddef>

#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"

namespace weir::internal {
namespace {

class Arena {
 public:
  Arena()
      // oneTBB's default thread limit is the number of cores; blocking calls need more threads.
      : control_(oneapi::tbb::global_control::max_allowed_parallelism,
                 static_cast<size_t>(kMaxArenaConcurrency) + 1),
        // No slot is reserved for an application thread: none joins the arena.
        arena_(kMaxArenaConcurrency, 0) {}

  void enqueue(void (*task)()) {
    arena_.enqueue([task] { task(); });
  }

 private:
  oneapi::tbb::global_control control_;
  oneapi::tbb::task_arena arena_;
};

}  // namespace

void arena_enqueue(void (*task)()) {
  // Never destroyed: a task may still run when static destructors do.
  static Arena* arena = new Arena();
  arena->enqueue(task);
}

}  // namespace weir::internal
