// `chimera bench serve`: load generator for an OpenAI-compatible server (ours
// or any other), reporting the metrics of `vllm bench serve`: successful and
// failed requests, duration, request / output / total token throughput, and
// mean, median and P99 of TTFT (time to first token), TPOT (time per output
// token after the first) and ITL (gap between consecutive streamed chunks),
// plus end-to-end latency. Requests stream (SSE) with usage reporting; output
// token counts come from the server's usage (else the chunk count).
// Dataset "random": prompts of --input-len random token ids (completions take
// ids directly; chat gets them detokenised by the server's /detokenize, or
// random words when the server has none), with ignore_eos so every request
// generates exactly --output-len tokens; --random-range-ratio R draws each
// length uniformly from [len*(1-R), len*(1+R)] as vLLM does. Only standard
// fields are needed from the server (the model id from /v1/models unless
// --model is given; vocab_size there is used when present), so llama-server
// and vLLM work too. Failed requests are counted (with the first error) and
// left out of the latency and throughput figures of the successful ones.
// Scheduling: --concurrency C keeps at most C requests in flight;
// --request-rate R issues requests at Poisson arrival times (R per second);
// both may be combined; neither = all at once. A progress bar goes to stderr,
// the report to stdout (--result-file also writes it as JSON).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "core/timer.h"

namespace chimera::cli {
namespace {

using json = nlohmann::json;

struct BenchServeOptions {
  std::string url = "http://127.0.0.1:8080", model, endpoint = "/v1/completions", dataset = "random";
  std::string api_key, result_file;
  int64_t input_len = 128, output_len = 128;
  int num_prompts = 100;
  int concurrency = 0;
  double request_rate = 0;  // 0 = infinite
  double range_ratio = 0;   // lengths uniform in [len*(1-r), len*(1+r)]
  uint64_t seed = 0;
  bool no_ignore_eos = false;
  double timeout_s = 600;
};

struct RequestResult {
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0, output_tokens = 0;
  int64_t sent_prompt_len = 0;  // what was sent, for servers that report no usage
  double ttft = 0, latency = 0;
  bool got_text = false;  // ttft is meaningful
  std::vector<double> itl;
};

httplib::Headers auth_headers(const BenchServeOptions& o) {
  httplib::Headers h;
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  return h;
}

std::unique_ptr<httplib::Client> make_client(const BenchServeOptions& o) {
  auto c = std::make_unique<httplib::Client>(o.url);
  c->set_connection_timeout(10, 0);
  c->set_read_timeout((time_t)o.timeout_s, 0);
  c->set_write_timeout(30, 0);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  return c;
}

RequestResult send_one(httplib::Client& cli, const BenchServeOptions& o, const std::string& body) {
  RequestResult r;
  std::string buf;
  bool done = false;
  int64_t chunks = 0;
  const double t0 = now_seconds();
  double t_prev = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = o.endpoint;
  req.headers = auth_headers(o);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.body = body;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    for (size_t i = 0; i < n; ++i)
      if (data[i] != '\r') buf.push_back(data[i]);  // CRLF line ends as LF
    size_t pos;
    while ((pos = buf.find("\n\n")) != std::string::npos) {
      std::string ev = buf.substr(0, pos);
      buf.erase(0, pos + 2);
      if (ev.rfind("data:", 0) != 0) continue;  // comments (keep-alive) and other fields
      std::string payload = ev.substr(5);
      if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        r.error = j["error"].value("message", "server error");
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        r.prompt_tokens = j["usage"].value("prompt_tokens", (int64_t)0);
        r.output_tokens = j["usage"].value("completion_tokens", (int64_t)0);
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      std::string text;
      if (c.contains("text") && c["text"].is_string()) text = c["text"];
      if (c.contains("delta") && c["delta"].is_object()) {
        const json& d = c["delta"];
        for (const char* k : {"content", "reasoning_content"})  // reasoning models stream thoughts first
          if (d.contains(k) && d[k].is_string() && text.empty()) text = d[k];
      }
      if (text.empty()) continue;
      const double t = now_seconds();
      if (chunks == 0) {
        r.ttft = t - t0;
        r.got_text = true;
      }
      else
        r.itl.push_back(t - t_prev);
      t_prev = t;
      ++chunks;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  r.latency = now_seconds() - t0;
  if (!sent) {
    r.error = "connection failed: " + httplib::to_string(err);
  } else if (res.status != 200) {
    // The error body went to the content receiver (res.body stays empty then).
    json j = json::parse(res.body.empty() ? buf : res.body, nullptr, false);
    r.error = "HTTP " + std::to_string(res.status);
    if (!j.is_discarded() && j.contains("error") && j["error"].is_object())
      r.error += ": " + j["error"].value("message", std::string());
  } else if (!done && r.error.empty()) {
    r.error = "the stream ended without [DONE]";
  }
  if (r.output_tokens == 0) r.output_tokens = chunks;
  r.ok = r.error.empty();
  return r;
}

struct Summary {
  double mean = 0, median = 0, p99 = 0;
};
Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= (double)v.size();
  auto pct = [&](double p) {  // linear interpolation, as numpy.percentile
    const double idx = p / 100.0 * (double)(v.size() - 1);
    const size_t lo = (size_t)std::floor(idx), hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - (double)lo);
  };
  s.median = pct(50);
  s.p99 = pct(99);
  return s;
}

void progress(int done, int total) {
  const int width = 40;
  const int fill = total ? done * width / total : width;
  std::fprintf(stderr, "\r[%s%s] %d/%d", std::string((size_t)fill, '#').c_str(),
               std::string((size_t)(width - fill), '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int run(const BenchServeOptions& o) {
  if (o.dataset != "random") return report_error("--dataset: only 'random' is supported");
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1)
    return report_error("--num-prompts, --input-len and --output-len must be >= 1");
  if (o.request_rate < 0 || o.concurrency < 0) return report_error("--request-rate and --concurrency must be >= 0");
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) return report_error("--random-range-ratio must be in [0, 1)");
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions")
    return report_error("--endpoint must be /v1/completions or /v1/chat/completions");
  const bool chat = o.endpoint == "/v1/chat/completions";
  auto cli = make_client(o);
  auto models = cli->Get("/v1/models", auth_headers(o));
  if (!models || models->status != 200)
    return report_error("cannot reach " + o.url + "/v1/models" +
                        (models ? " (HTTP " + std::to_string(models->status) + ")" : ""));
  json mj = json::parse(models->body, nullptr, false);
  std::string model = o.model;
  int64_t vocab = 0;
  if (!mj.is_discarded() && mj.contains("data") && mj["data"].is_array() && !mj["data"].empty()) {
    if (model.empty()) model = mj["data"][0].value("id", std::string());
    vocab = mj["data"][0].value("vocab_size", (int64_t)0);
  }
  if (vocab <= 0) vocab = 256;  // servers that do not report it: stay within any vocabulary's byte range
  // Random token ids, away from the low ids most vocabularies reserve for control tokens.
  std::mt19937_64 rng(o.seed);
  const int64_t lo = std::min<int64_t>(vocab / 2, 300);
  std::uniform_int_distribution<int64_t> pick(lo, vocab - 1);
  auto draw_len = [&](int64_t len) {
    const int64_t a = std::max<int64_t>(1, (int64_t)std::floor((double)len * (1 - o.range_ratio)));
    const int64_t b = std::max<int64_t>(a, (int64_t)std::ceil((double)len * (1 + o.range_ratio)));
    return std::uniform_int_distribution<int64_t>(a, b)(rng);
  };
  std::vector<std::string> bodies;
  std::vector<int64_t> sent_len;
  bool detokenize = chat;
  for (int i = 0; i < o.num_prompts; ++i) {
    const int64_t in_len = o.range_ratio > 0 ? draw_len(o.input_len) : o.input_len;
    const int64_t out_len = o.range_ratio > 0 ? draw_len(o.output_len) : o.output_len;
    std::vector<int64_t> ids((size_t)in_len);
    for (auto& t : ids) t = pick(rng);
    json b = {{"model", model}, {"max_tokens", out_len}, {"stream", true},
              {"stream_options", {{"include_usage", true}}}, {"temperature", 0.0}, {"ignore_eos", !o.no_ignore_eos}};
    if (chat) {
      // llama-server and chimera answer {"content"}, vLLM {"prompt"} (and wants the model).
      std::string text;
      if (detokenize) {
        auto d = cli->Post("/detokenize", auth_headers(o), json({{"model", model}, {"tokens", ids}}).dump(),
                           "application/json");
        json dj = d && d->status == 200 ? json::parse(d->body, nullptr, false) : json();
        for (const char* k : {"content", "prompt"})
          if (text.empty() && !dj.is_discarded() && dj.is_object() && dj.contains(k) && dj[k].is_string()) text = dj[k];
        if (text.empty()) detokenize = false;  // not offered: random words from here on
      }
      if (text.empty()) {
        static const char* const kWords[] = {"time", "river", "blue", "open", "small", "light", "stone", "gave",
                                             "under", "quick", "house", "seven", "paper", "north", "sing", "warm"};
        for (int64_t k = 0; k < in_len; ++k) text += std::string(k ? " " : "") + kWords[ids[(size_t)k] % 16];
      }
      b["messages"] = json::array({{{"role", "user"}, {"content", text}}});
    } else {
      b["prompt"] = ids;
    }
    bodies.push_back(b.dump(-1, ' ', false, json::error_handler_t::replace));
    sent_len.push_back(in_len);
  }
  // Arrival times (Poisson process) when a rate is given.
  std::vector<double> arrival((size_t)o.num_prompts, 0.0);
  if (o.request_rate > 0) {
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (auto& a : arrival) {
      a = t;
      t += gap(rng);
    }
  }
  int workers = o.concurrency > 0 ? o.concurrency : o.num_prompts;
  workers = std::min({workers, o.num_prompts, 1024});
  std::vector<RequestResult> results((size_t)o.num_prompts);
  std::atomic<int> next{0};
  std::mutex mu;
  int completed = 0;
  progress(0, o.num_prompts);
  const double t_start = now_seconds();
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      auto c = make_client(o);
      for (int i; (i = next.fetch_add(1)) < o.num_prompts;) {
        const double wait = t_start + arrival[(size_t)i] - now_seconds();
        if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
        results[(size_t)i] = send_one(*c, o, bodies[(size_t)i]);
        results[(size_t)i].sent_prompt_len = sent_len[(size_t)i];
        std::lock_guard<std::mutex> lk(mu);
        progress(++completed, o.num_prompts);
      }
    });
  }
  for (auto& t : pool) t.join();
  const double duration = now_seconds() - t_start;

  int ok = 0, failed = 0;
  int64_t in_tok = 0, out_tok = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  std::string first_error;
  for (const auto& r : results) {
    if (!r.ok) {
      ++failed;
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++ok;
    in_tok += r.prompt_tokens > 0 ? r.prompt_tokens : r.sent_prompt_len;
    out_tok += r.output_tokens;
    e2e.push_back(r.latency * 1e3);
    if (!r.got_text) continue;  // nothing streamed: no first token to time
    ttft.push_back(r.ttft * 1e3);
    if (r.output_tokens > 1) tpot.push_back((r.latency - r.ttft) * 1e3 / (double)(r.output_tokens - 1));
    for (double x : r.itl) itl.push_back(x * 1e3);
  }
  const Summary s_ttft = summarize(ttft), s_tpot = summarize(tpot), s_itl = summarize(itl), s_e2e = summarize(e2e);
  auto line = [](const char* k, double v) { std::printf("%-40s %-10.2f\n", k, v); };
  std::printf("============ Serving Benchmark Result ============\n");
  std::printf("%-40s %-10d\n", "Successful requests:", ok);
  std::printf("%-40s %-10d\n", "Failed requests:", failed);
  if (o.concurrency > 0) std::printf("%-40s %-10d\n", "Maximum request concurrency:", o.concurrency);
  line("Benchmark duration (s):", duration);
  std::printf("%-40s %-10lld\n", "Total input tokens:", (long long)in_tok);
  std::printf("%-40s %-10lld\n", "Total generated tokens:", (long long)out_tok);
  line("Request throughput (req/s):", ok / duration);
  line("Output token throughput (tok/s):", out_tok / duration);
  line("Total Token throughput (tok/s):", (in_tok + out_tok) / duration);
  auto section = [&](const char* title, const char* name, const Summary& s) {
    std::printf("%s\n", title);
    line((std::string("Mean ") + name + " (ms):").c_str(), s.mean);
    line((std::string("Median ") + name + " (ms):").c_str(), s.median);
    line((std::string("P99 ") + name + " (ms):").c_str(), s.p99);
  };
  section("---------------Time to First Token----------------", "TTFT", s_ttft);
  section("-----Time per Output Token (excl. 1st token)------", "TPOT", s_tpot);
  section("---------------Inter-token Latency----------------", "ITL", s_itl);
  section("----------------End-to-end Latency----------------", "E2EL", s_e2e);
  std::printf("==================================================\n");
  if (failed) std::fprintf(stderr, "first failure: %s\n", first_error.c_str());
  if (!o.result_file.empty()) {
    auto sj = [](const Summary& s) { return json{{"mean", s.mean}, {"median", s.median}, {"p99", s.p99}}; };
    json out = {{"completed", ok}, {"failed", failed}, {"duration_s", duration}, {"total_input_tokens", in_tok},
                {"total_output_tokens", out_tok}, {"request_throughput", ok / duration},
                {"output_throughput", out_tok / duration}, {"total_token_throughput", (in_tok + out_tok) / duration},
                {"ttft_ms", sj(s_ttft)}, {"tpot_ms", sj(s_tpot)}, {"itl_ms", sj(s_itl)}, {"e2el_ms", sj(s_e2e)},
                {"num_prompts", o.num_prompts}, {"concurrency", o.concurrency}, {"request_rate", o.request_rate},
                {"input_len", o.input_len}, {"output_len", o.output_len}, {"random_range_ratio", o.range_ratio},
                {"model", model}, {"endpoint", o.endpoint}, {"first_error", failed ? json(first_error) : json()}};
    std::ofstream f(o.result_file);
    f << out.dump(2) << "\n";
    if (!f) return report_error("cannot write '" + o.result_file + "'");
  }
  return ok > 0 ? 0 : report_error("every request failed");
}

}  // namespace

void add_bench_serve_command(CLI::App* bench, std::function<void()> bench_callback) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* sub = bench->add_subcommand("serve", "Load-test an OpenAI-compatible server (vllm bench serve metrics)");
  sub->add_option("--url", o->url, "Server base URL")->capture_default_str();
  sub->add_option("--model", o->model, "Model id to request (default: the server's first)");
  sub->add_option("--endpoint", o->endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  sub->add_option("--dataset", o->dataset, "Prompt source: random")->capture_default_str();
  sub->add_option("--input-len", o->input_len, "Prompt tokens per request")->capture_default_str();
  sub->add_option("--output-len", o->output_len, "Generated tokens per request")->capture_default_str();
  sub->add_option("--num-prompts", o->num_prompts, "Requests to send")->capture_default_str();
  sub->add_option("--concurrency", o->concurrency, "Maximum requests in flight (0 = unlimited)");
  sub->add_option("--request-rate", o->request_rate, "Poisson arrival rate in requests/s (0 = all at once)");
  sub->add_option("--random-range-ratio", o->range_ratio,
                  "Draw each input/output length uniformly from [len*(1-R), len*(1+R)]")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed for prompts and arrivals")->capture_default_str();
  sub->add_option("--api-key", o->api_key, "Bearer key");
  sub->add_option("--timeout", o->timeout_s, "Per-request read timeout (s)")->capture_default_str();
  sub->add_option("--result-file", o->result_file, "Also write the results as JSON");
  sub->add_flag("--no-ignore-eos", o->no_ignore_eos, "Let requests stop at end-of-generation tokens");
  sub->callback([o] { set_exit_code(run(*o)); });
  // `bench` itself needs -m, `bench serve` does not: check it here instead of in CLI11.
  CLI::Option* model = bench->get_option("--model");
  model->required(false);
  bench->callback([bench, sub, model, bench_callback] {
    if (sub->parsed()) return;
    if (model->count() == 0) {
      report_error("--model is required (or use `chimera bench serve`)");
      return;
    }
    bench_callback();
  });
}

}  // namespace chimera::cli
