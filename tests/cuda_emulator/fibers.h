// Runs one thread block of an emulated kernel on the calling OS thread: one
// fiber (ucontext) per CUDA thread, switched only where CUDA threads wait
// for each other (__syncthreads, warp shuffles). A fiber waiting at a
// barrier is not resumed until the barrier opens, so a block costs about
// two context switches per thread per barrier.
//
// A block whose threads can never all reach a barrier (some exited, or wait
// at a different one) is a deadlock on a GPU too; run() reports it instead
// of hanging.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ucontext.h>

namespace fusejit::emulator {

class BlockRunner {
 public:
  // The order fibers run in between barriers. kThreads: every thread of the
  // block to its next barrier, in turn. kWarps: each warp as far as it can
  // go (through its shuffles) before the next warp starts, so a warp that
  // writes shared memory before another has read it shows up as a wrong
  // result: a missing __syncthreads that thread order would hide.
  enum class Schedule { kThreads, kWarps };

  BlockRunner();
  void set_schedule(Schedule schedule) { schedule_ = schedule; }
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs `body` once per thread of a block of `threads` threads, calling
  // `enter(thread)` before each resumption of that thread's fiber. Returns
  // an empty string, or what went wrong (a deadlock, described).
  std::string run(int threads, const std::function<void()>& body, const std::function<void(int)>& enter);

  // Called from inside a fiber (through fj_emu_state) by the running thread.
  static void sync_block();
  static unsigned shuffle_xor(unsigned value, int lane_mask);

 private:
  struct Barrier {
    int expected = 0;
    int arrived = 0;
    uint64_t generation = 0;
  };
  struct Fiber {
    ucontext_t context;
    char* stack = nullptr;
    int index = 0;
    bool done = false;
    const Barrier* waiting = nullptr;
    uint64_t wait_generation = 0;
    void* fake_stack = nullptr;  // AddressSanitizer's, while switched out
  };

  static void fiber_main();
  void wait(Barrier& barrier);
  void switch_to_scheduler(bool finished);
  std::string describe_deadlock() const;

  std::vector<Fiber> fibers_;
  // A fiber's stack: mapped with an inaccessible page below it, so that an
  // overflow crashes instead of writing over the heap.
  class Stack {
   public:
    explicit Stack(size_t bytes);
    Stack(Stack&& other) noexcept : map_(std::exchange(other.map_, nullptr)), map_bytes_(other.map_bytes_) {}
    Stack(const Stack&) = delete;
    Stack& operator=(const Stack&) = delete;
    Stack& operator=(Stack&&) = delete;
    ~Stack();
    char* bottom() const;

   private:
    char* map_;
    size_t map_bytes_;
  };
  std::vector<Stack> stacks_;
  ucontext_t scheduler_;
  void* scheduler_fake_stack_ = nullptr;
  const void* scheduler_stack_bottom_ = nullptr;
  size_t scheduler_stack_size_ = 0;
  Fiber* current_ = nullptr;
  Barrier block_barrier_;
  std::vector<Barrier> warp_barriers_;
  std::vector<unsigned> lanes_;  // one shuffle slot per thread
  const std::function<void()>* body_ = nullptr;
  Schedule schedule_ = Schedule::kThreads;
};

}  // namespace fusejit::emulator
