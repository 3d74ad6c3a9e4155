// The engine thread pool: one worker per core, static partitioning.
// parallel_for splits [0, n) into contiguous ranges, one per thread, so a given
// (n, thread count) always gives the same partition; kernels that write disjoint
// outputs per range are therefore deterministic and agree across thread counts
// as long as each output element is computed by one range.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace chimera {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) for contiguous ranges covering [0, n).
  // `grain` is the unit ranges are aligned to (e.g. 16 rows). Blocks until done.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain = 1);

  // Calls fn(thread_index, n_threads) once on every thread.
  void run_on_all(const std::function<void(int, int)>& fn);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_start_;
  // Jobs are published by bumping generation_; workers spin briefly on it
  // (decode issues hundreds of short jobs per token, and a futex wake-up per
  // job costs more than the job) before blocking on cv_start_.
  std::atomic<const std::function<void(int, int)>*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// Runs fn(begin, end) over [0, n) split across the pool's threads in units of
// `grain` (inline when pool is null, has one thread, or n <= grain).
void parallel_range(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Process-wide pool used by the CLI and server (size set once at start-up).
ThreadPool& global_thread_pool();
void set_global_thread_count(int n);

}  // namespace chimera
