#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <pthread.h>

#include "fusion/cpu_work_split.h"
#include "ir/cpu_count.h"
#include "ir/messages.h"

namespace fusejit {

namespace {

int configured_thread_count() {
  const int usable = usable_cpu_count();
  if (const char* env = std::getenv("FUSEJIT_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 1024) {
      // More threads than the process has CPUs time-share them: every
      // kernel (and the cost model's calibration) runs slower, not faster.
      if (n > usable) {
        warn(fmt::format(
            "FUSEJIT_THREADS={} is more than the {} CPUs this process may use; kernels will share cores and run "
            "slower",
            n, usable));
      }
      return static_cast<int>(n);
    }
    warn(fmt::format("FUSEJIT_THREADS={} is not a thread count from 1 to 1024; using {}", env, usable));
  }
  return usable;
}

thread_local int this_thread_index = 0;

// The process's pool. A child of fork() has only the thread that forked:
// the pool it inherits has no workers, and waiting for them hung the
// child's first kernel, and joining them its exit. The child makes a pool
// of its own (of the same size, which the plans' per-thread arrays were
// made for) on first use, and leaves the inherited one alone: never
// destroyed, since its threads cannot be joined.
std::mutex global_mutex;
std::atomic<ThreadPool*> global_pool{nullptr};
std::atomic<bool> pool_inherited{false};  // set in a child of fork()

struct GlobalPoolShutdown {
  ~GlobalPoolShutdown() {
    if (!pool_inherited.load()) delete global_pool.exchange(nullptr);
  }
};

void lock_global_for_fork() { global_mutex.lock(); }
void unlock_global_after_fork() { global_mutex.unlock(); }
void unlock_global_in_child() {
  pool_inherited.store(true);
  global_mutex.unlock();
  this_thread_index = 0;  // the forking thread may have been a worker; it is the child's only thread
}

}  // namespace

ThreadPool& ThreadPool::global() {
  static GlobalPoolShutdown shutdown;
  // global_mutex is held across fork(), so that a child never inherits it
  // locked by a thread it does not have.
  static const int registered = pthread_atfork(lock_global_for_fork, unlock_global_after_fork, unlock_global_in_child);
  (void)registered;
  // Every kernel run asks: no lock once the pool exists.
  if (ThreadPool* pool = global_pool.load(std::memory_order_acquire); pool != nullptr && !pool_inherited.load()) {
    return *pool;
  }
  std::lock_guard<std::mutex> lock(global_mutex);
  ThreadPool* pool = global_pool.load();
  if (pool == nullptr || pool_inherited.load()) {
    // Kept reachable: a leak checker (LeakSanitizer) would fail the child.
    static auto* const inherited = new std::vector<ThreadPool*>();
    if (pool != nullptr) inherited->push_back(pool);
    pool = new ThreadPool(pool != nullptr ? pool->size() : configured_thread_count());
    global_pool.store(pool, std::memory_order_release);
    pool_inherited.store(false);
  }
  return *pool;
}

int ThreadPool::thread_index() { return this_thread_index; }

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this, i] {
      this_thread_index = i;
      worker_loop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    int64_t chunk;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_chunk_ >= num_chunks_) return;
      chunk = next_chunk_++;
    }
    const int64_t begin = chunk * chunk_;
    (*fn_)(begin, std::min(count_, begin + chunk_));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) work_done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  // One chunk per thread (kernels do the same work per item), which keeps
  // each thread's memory contiguous; the cost model charges the same split.
  const CpuChunks split = cpu_chunks(count, grain, size());
  // A thread already inside a job (a worker, or the caller running its
  // chunks) cannot wait for the pool it is part of.
  thread_local bool in_job = false;
  if (split.chunks == 1 || workers_.empty() || in_job || thread_index() != 0) {
    fn(0, count);
    return;
  }
  std::lock_guard<std::mutex> job(job_mutex_);
  in_job = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    count_ = count;
    chunk_ = split.chunk;
    num_chunks_ = split.chunks;
    next_chunk_ = 0;
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_ready_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return busy_ == 0; });
  fn_ = nullptr;
  in_job = false;
}

}  // namespace fusejit
