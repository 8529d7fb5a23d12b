#include "fibers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FJ_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/common_interface_defs.h>
#define FJ_EMU_ASAN 1
#endif
#endif

namespace fusejit::emulator {
namespace {

// Generated kernels keep a few arrays of row values and nothing recursive;
// pages are only touched as used.
constexpr size_t kStackBytes = 256 << 10;
constexpr int kWarpSize = 32;
const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

thread_local BlockRunner* g_runner = nullptr;

// AddressSanitizer must be told when the stack changes under it.
void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#ifdef FJ_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void finish_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#ifdef FJ_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace

BlockRunner::BlockRunner() = default;
BlockRunner::~BlockRunner() = default;

void BlockRunner::fiber_main() {
  BlockRunner& self = *g_runner;
  finish_switch(nullptr, &self.scheduler_stack_bottom_, &self.scheduler_stack_size_);
  (*self.body_)();
  self.switch_to_scheduler(/*finished=*/true);
}

void BlockRunner::switch_to_scheduler(bool finished) {
  Fiber& fiber = *current_;
  if (finished) {
    fiber.done = true;
    start_switch(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);  // this fiber's stack dies
    setcontext(&scheduler_);
    std::abort();  // setcontext does not return
  }
  start_switch(&fiber.fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
  swapcontext(&fiber.context, &scheduler_);
  finish_switch(fiber.fake_stack, &scheduler_stack_bottom_, &scheduler_stack_size_);
}

void BlockRunner::wait(Barrier& barrier) {
  if (++barrier.arrived == barrier.expected) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  current_->waiting = &barrier;
  current_->wait_generation = barrier.generation;
  switch_to_scheduler(/*finished=*/false);
}

void BlockRunner::sync_block() { g_runner->wait(g_runner->block_barrier_); }

unsigned BlockRunner::shuffle_xor(unsigned value, int lane_mask) {
  BlockRunner& self = *g_runner;
  const int thread = self.current_->index;
  const int warp = thread / kWarpSize;
  const int lane = thread % kWarpSize;
  Barrier& barrier = self.warp_barriers_[warp];
  self.lanes_[thread] = value;
  self.wait(barrier);  // every lane has written its value
  const int partner = lane ^ (lane_mask & (kWarpSize - 1));
  const unsigned result = partner < barrier.expected ? self.lanes_[warp * kWarpSize + partner] : value;
  self.wait(barrier);  // every lane has read before any writes again
  return result;
}

BlockRunner::Stack::Stack(size_t bytes) : map_(nullptr), map_bytes_(bytes + kPage) {
  void* map = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED || mprotect(map, kPage, PROT_NONE) != 0) {
    std::fprintf(stderr, "fusejit CUDA emulator: cannot map a fiber stack of %zu bytes\n", bytes);
    std::abort();
  }
  map_ = static_cast<char*>(map);
}

BlockRunner::Stack::~Stack() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

char* BlockRunner::Stack::bottom() const { return map_ + kPage; }

std::string BlockRunner::run(int threads, const std::function<void()>& body, const std::function<void(int)>& enter) {
  while (static_cast<int>(stacks_.size()) < threads) stacks_.emplace_back(kStackBytes);  // untouched until used
  fibers_.assign(threads, Fiber{});
  block_barrier_ = Barrier{.expected = threads};
  warp_barriers_.assign((threads + kWarpSize - 1) / kWarpSize, Barrier{});
  for (int w = 0; w < static_cast<int>(warp_barriers_.size()); ++w) {
    warp_barriers_[w].expected = std::min(kWarpSize, threads - w * kWarpSize);
  }
  lanes_.assign(threads, 0);
  body_ = &body;
  BlockRunner* const outer = g_runner;
  g_runner = this;
  for (int t = 0; t < threads; ++t) {
    Fiber& f = fibers_[t];
    f.index = t;
    f.stack = stacks_[t].bottom();
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, &BlockRunner::fiber_main, 0);
  }
  int remaining = threads;
  std::string error;
  // Resumes fibers [begin, end) that can run, once each; true if any ran.
  const auto sweep = [&](int begin, int end) {
    bool ran = false;
    for (int t = begin; t < end; ++t) {
      Fiber& f = fibers_[t];
      if (f.done) continue;
      if (f.waiting != nullptr && f.waiting->generation == f.wait_generation) continue;
      f.waiting = nullptr;
      current_ = &f;
      enter(f.index);
      start_switch(&scheduler_fake_stack_, f.stack, kStackBytes);
      swapcontext(&scheduler_, &f.context);
      finish_switch(scheduler_fake_stack_, nullptr, nullptr);
      ran = true;
      if (f.done) --remaining;
    }
    return ran;
  };
  while (remaining > 0) {
    bool progressed = false;
    if (schedule_ == Schedule::kThreads) {
      progressed = sweep(0, threads);
    } else {  // each warp as far as it goes before the next one starts
      for (int w = 0; w * kWarpSize < threads; ++w) {
        while (sweep(w * kWarpSize, std::min(threads, (w + 1) * kWarpSize))) progressed = true;
      }
    }
    if (!progressed) {
      error = describe_deadlock();
      break;
    }
  }
  current_ = nullptr;
  g_runner = outer;
  return error;
}

std::string BlockRunner::describe_deadlock() const {
  int exited = 0, at_block = 0, at_warp = 0;
  for (const Fiber& f : fibers_) {
    if (f.done) {
      ++exited;
    } else if (f.waiting == &block_barrier_) {
      ++at_block;
    } else {
      ++at_warp;
    }
  }
  return fmt::format(
      "deadlock in a block of {} threads: {} wait at __syncthreads, {} at a warp shuffle, {} have exited "
      "(every thread of the block must reach each __syncthreads, every lane of a warp each shuffle)",
      fibers_.size(), at_block, at_warp, exited);
}

}  // namespace fusejit::emulator
