// Prometheus text rendering of the server metrics; see metrics.h.
#include "server/metrics.h"

#include <cstdio>

namespace chimera::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void scalar(std::string& out, const char* name, const char* type, const char* help, double v) {
  header(out, name, type, help);
  out += std::string(name) + " " + num(v) + "\n";
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_(latency_buckets()),
      itl_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5}),
      e2e_(latency_buckets()),
      queue_(latency_buckets()) {}

void Metrics::count_http(int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++http_[status];
}
void Metrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  ++finish_[reason];
}
void Metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  prompt_tokens_ += (uint64_t)n;
}
void Metrics::add_prefill_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  prefill_tokens_ += (uint64_t)n;
}
void Metrics::add_generated_tokens(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  generated_tokens_ += (uint64_t)n;
}
void Metrics::add_diffusion_forward(int64_t requests) {
  std::lock_guard<std::mutex> lk(mu_);
  ++diffusion_forwards_;
  diffusion_request_steps_ += (uint64_t)requests;
}
void Metrics::add_prefix_cache(int64_t query_tokens, int64_t hit_tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  cache_query_ += (uint64_t)query_tokens;
  cache_hit_ += (uint64_t)hit_tokens;
}
void Metrics::observe_ttft(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  ttft_.observe(s);
}
void Metrics::observe_itl(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  itl_.observe(s);
}
void Metrics::observe_e2e(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  e2e_.observe(s);
}
void Metrics::observe_queue(double s) {
  std::lock_guard<std::mutex> lk(mu_);
  queue_.observe(s);
}
void Metrics::set_gauges(const EngineGauges& g) {
  std::lock_guard<std::mutex> lk(mu_);
  gauges_ = g;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  header(out, "chimera_http_requests_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : http_)
    out += "chimera_http_requests_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  header(out, "chimera_requests_total", "counter", "Generation requests finished, by finish reason.");
  for (const char* r : {"stop", "length", "cancelled", "error"}) {
    auto it = finish_.find(r);
    out += std::string("chimera_requests_total{finish_reason=\"") + r + "\"} " +
           std::to_string(it == finish_.end() ? 0 : it->second) + "\n";
  }
  scalar(out, "chimera_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", (double)prompt_tokens_);
  scalar(out, "chimera_prefill_tokens_total", "counter",
         "Prompt tokens run through the model (not restored from the prefix cache; a prompt of n choices once).",
         (double)prefill_tokens_);
  scalar(out, "chimera_generation_tokens_total", "counter", "Generated tokens.", (double)generated_tokens_);
  scalar(out, "chimera_diffusion_forwards_total", "counter",
         "Forward passes of diffusion denoising steps (one per engine iteration, fused over the running requests).",
         (double)diffusion_forwards_);
  scalar(out, "chimera_diffusion_request_steps_total", "counter",
         "Denoising steps of diffusion requests (summed over requests; / forwards = requests per fused forward).",
         (double)diffusion_request_steps_);
  scalar(out, "chimera_prefix_cache_query_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.",
         (double)cache_query_);
  scalar(out, "chimera_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens restored from the prefix cache (not prefilled).", (double)cache_hit_);
  scalar(out, "chimera_prefix_cache_hit_rate", "gauge", "Hit tokens / query tokens since start.",
         cache_query_ ? (double)cache_hit_ / (double)cache_query_ : 0.0);
  header(out, "chimera_time_to_first_token_seconds", "histogram", "Submission to first generated token.");
  ttft_.render("chimera_time_to_first_token_seconds", out);
  header(out, "chimera_inter_token_latency_seconds", "histogram", "Time between consecutive generated tokens.");
  itl_.render("chimera_inter_token_latency_seconds", out);
  header(out, "chimera_request_latency_seconds", "histogram", "Submission to completion.");
  e2e_.render("chimera_request_latency_seconds", out);
  header(out, "chimera_queue_time_seconds", "histogram", "Submission to admission.");
  queue_.render("chimera_queue_time_seconds", out);
  scalar(out, "chimera_requests_waiting", "gauge", "Requests queued for admission.", (double)gauges_.waiting);
  scalar(out, "chimera_requests_running", "gauge", "Sequences admitted (prefill or decode).", (double)gauges_.running);
  scalar(out, "chimera_state_memory_bytes", "gauge", "Sequence state (KV / recurrent) bytes allocated.",
         (double)gauges_.state_bytes);
  scalar(out, "chimera_prefix_cache_memory_bytes", "gauge", "Prefix-cache snapshot bytes.",
         (double)gauges_.cache_bytes);
  scalar(out, "chimera_prefix_cache_entries", "gauge", "Prefix-cache snapshots held.", (double)gauges_.cache_entries);
  scalar(out, "chimera_memory_budget_bytes", "gauge", "Budget for states + prefix cache.",
         (double)gauges_.budget_bytes);
  return out;
}

}  // namespace chimera::server
