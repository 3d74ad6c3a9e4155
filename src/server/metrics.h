// Server metrics in the Prometheus text exposition format (served at /metrics).
// Counters (HTTP responses by status, finished requests by finish reason,
// prompt / prefilled / generated tokens, prefix-cache query and hit tokens), histograms
// (time to first token, inter-token latency, end-to-end latency, queue time)
// and gauges the engine loop refreshes every iteration (waiting and running
// requests, state / prefix-cache memory, budget).
// Invariants: every method is thread-safe (HTTP threads and the engine loop
// write, any thread renders); histogram buckets are fixed at construction and
// cumulative in the output, as Prometheus requires. Nothing here knows about
// models or HTTP.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace chimera::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Appends "<name>_bucket{le=...}", "_sum" and "_count" lines.
  void render(const std::string& name, std::string& out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct EngineGauges {
  int64_t waiting = 0;          // queued, not yet admitted
  int64_t running = 0;          // admitted sequences (prefilling or decoding)
  int64_t state_bytes = 0;      // sequence states allocated (running + pooled)
  int64_t cache_bytes = 0;      // prefix-cache snapshots
  int64_t cache_entries = 0;
  int64_t budget_bytes = 0;
};

class Metrics {
 public:
  Metrics();
  void count_http(int status);
  void count_finish(const std::string& reason);  // "stop", "length", "cancelled", "error"
  void add_prompt_tokens(int64_t n);
  void add_prefill_tokens(int64_t n);  // prompt tokens actually run through the model
  void add_generated_tokens(int64_t n);
  void add_prefix_cache(int64_t query_tokens, int64_t hit_tokens);
  // One forward that ran a denoising step of `requests` diffusion requests.
  void add_diffusion_forward(int64_t requests);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_e2e(double seconds);
  void observe_queue(double seconds);
  void set_gauges(const EngineGauges& g);
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> http_;
  std::map<std::string, uint64_t> finish_;
  uint64_t prompt_tokens_ = 0, prefill_tokens_ = 0, generated_tokens_ = 0, cache_query_ = 0, cache_hit_ = 0;
  uint64_t diffusion_forwards_ = 0, diffusion_request_steps_ = 0;
  Histogram ttft_, itl_, e2e_, queue_;
  EngineGauges gauges_;
};

}  // namespace chimera::server
