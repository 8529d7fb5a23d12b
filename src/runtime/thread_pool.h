// The threads CPU kernels run on: one pool per process, created on first
// use, with FUSEJIT_THREADS threads (default: the hardware's), the caller
// counting as one of them. A child of fork() gets a pool of its own on first
// use (fork while another thread is inside fusejit is not supported: locks
// it holds stay locked in the child).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fusejit {

class ThreadPool {
 public:
  static ThreadPool& global();
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // The calling thread's index in the pool: 1 to size() - 1 for its workers,
  // 0 for any other thread (the one that calls parallel_for runs chunks
  // too). Lets per-thread state live in a vector of size() slots.
  static int thread_index();

  // Calls fn(begin, end) on consecutive ranges covering [0, count), each of
  // at least `grain` items (but the last), spread over the pool, and waits
  // for all of them. Calls from several threads (plans run on threads of
  // their own) take the pool in turn; a call from inside fn (or from a
  // worker) runs all of it on the calling thread.
  void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex job_mutex_;  // held by the thread whose job the pool runs
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // The current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t count_ = 0, chunk_ = 1, num_chunks_ = 0;
  int64_t next_chunk_ = 0;  // guarded by mutex_
  int busy_ = 0;            // workers still inside the job
};

}  // namespace fusejit
