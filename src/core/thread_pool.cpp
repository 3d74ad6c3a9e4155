// Thread pool implementation: a generation counter wakes workers for each job;
// the calling thread takes part as thread 0.
#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

#include "core/cpu_features.h"

namespace chimera {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}
constexpr int kSpinBeforeSleep = 20000;   // ~0.3-1 ms of pause instructions
constexpr int kSpinBeforeYield = 4000;
}  // namespace

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (stop_.load(std::memory_order_acquire)) return;
      if (++spins < kSpinBeforeSleep) {
        cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
      spins = 0;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = g;
    const std::function<void(int, int)>* job = job_.load(std::memory_order_acquire);
    (*job)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_on_all(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_.store(&fn, std::memory_order_release);
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  {
    // Pairs with the predicate check of a worker about to block: it either
    // sees the new generation or is already waiting and gets this notify.
    std::lock_guard<std::mutex> lk(mu_);
  }
  cv_start_.notify_all();
  fn(0, n_threads_);
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinBeforeYield) cpu_relax();
    else std::this_thread::yield();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int nt = (int)std::min<int64_t>(n_threads_, units);
  if (nt <= 1) {
    fn(0, n, 0);
    return;
  }
  run_on_all([&](int t, int) {
    if (t >= nt) return;
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    const int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e, t);
  });
}

void parallel_range(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (!pool || pool->size() <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
  pool->parallel_for(n, [&](int64_t b, int64_t e, int) { if (e > b) fn(b, e); }, grain);
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> p;
  return p;
}
}  // namespace

ThreadPool& global_thread_pool() {
  auto& p = pool_slot();
  if (!p) p = std::make_unique<ThreadPool>(default_thread_count());
  return *p;
}

void set_global_thread_count(int n) {
  auto& p = pool_slot();
  if (p && p->size() == n) return;
  p.reset();
  p = std::make_unique<ThreadPool>(n);
}

}  // namespace chimera
