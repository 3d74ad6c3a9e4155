// `chimera serve`: the OpenAI-compatible HTTP server (docs/SERVER.md). Loads
// the model, starts the engine loop (continuous batching, prefix cache) and
// the HTTP front end, prints "chimera: listening on http://HOST:PORT" on
// stderr once the socket is bound (tests parse it when --port 0 picks a free
// port), and shuts down cleanly on SIGINT / SIGTERM: the listener stops,
// in-flight requests end as cancelled, the engine joins.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/diffusion_options.h"
#include "core/thread_pool.h"
#include "runtime/expert_placement.h"
#include "server/engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"

namespace chimera::cli {
namespace {

struct ServeOptions {
  std::string model, alias;
  std::string host = "127.0.0.1";
  int port = 8080;
  int64_t n_ctx = 0;
  int parallel = 4;
  std::vector<std::string> api_keys;  // --api-key (repeatable)
  std::string api_key_file;           // --api-key-file: one key per line
  std::string cache_scope = "key";    // --prefix-cache-scope key|shared
  int64_t mem_budget_mb = 0;
  int64_t prefill_chunk = 256;
  int64_t checkpoint_interval = 256;
  int64_t max_queue = 1024;
  int http_threads = 0;
  int64_t max_body_mb = 16;
  int64_t max_header_bytes = 32 << 10;
  int max_connections = 512;
  int64_t max_buffered_mb = 0;  // 0: max(512, 4 x max_body_mb)
  double header_timeout = 10, body_timeout = 60, idle_timeout = 5;
  bool no_prefix_cache = false;
  bool no_webui = false;  // --no-webui: no chat page at GET /
  std::string expert_placement;  // --expert-placement PLAN.json (MoE models)
  std::string chat_template_file;  // replaces the model's chat template
  ComputeOptions compute;
  DiffusionCliOptions diffusion;  // diffusion LMs: server defaults (a request's JSON may override them)
};

int run(const ServeOptions& o) {
  // Signals go to a watcher thread (blocked everywhere else, including the
  // compute pool's workers started by compute.apply() and the engine and HTTP
  // threads created below — a worker with SIGTERM unblocked would take the
  // default action and kill the server); a dead client's socket must not kill us.
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (Status s = o.compute.apply(); !s) return report_error(s);
  if (o.parallel < 1 || o.parallel > 4096) return report_error("--parallel must be between 1 and 4096");
  // Bytes = MiB << 20 must fit size_t; 2^40 MiB (1 EiB) is far beyond any machine.
  if (o.mem_budget_mb < 0 || o.mem_budget_mb > ((int64_t)1 << 40))
    return report_error("--mem-budget-mb must be between 0 and " + std::to_string((int64_t)1 << 40) + " (got " +
                        std::to_string(o.mem_budget_mb) + ")");
  if (o.cache_scope != "key" && o.cache_scope != "shared")
    return report_error("--prefix-cache-scope must be 'key' or 'shared' (got '" + o.cache_scope + "')");
  std::vector<std::string> keys = o.api_keys;
  if (!o.api_key_file.empty()) {
    auto text = read_text_file(o.api_key_file);
    if (!text) return report_error(text.status());
    size_t pos = 0;
    while (pos < text->size()) {
      size_t end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      std::string line = text->substr(pos, end - pos);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      if (!line.empty() && line[0] != '#') keys.push_back(line);
      pos = end + 1;
    }
    if (keys.size() == o.api_keys.size()) return report_error("--api-key-file '" + o.api_key_file + "' holds no key");
  }
  for (const auto& k : keys)
    if (k.empty()) return report_error("--api-key must not be empty");
  if (o.max_buffered_mb > 0 && o.max_buffered_mb < o.max_body_mb)
    return report_error("--max-buffered-mb must be at least --max-body-mb");
  auto diffusion = o.diffusion.resolve();
  if (!diffusion) return report_error(diffusion.status());
  if (diffusion->visual)
    return report_error("--visual redraws one canvas on a terminal; serve runs many requests at once (use chimera run)");
  auto mr = load_model_verbose(o.model, false);
  if (!mr) return report_error(mr.status());
  models::Model& model = **mr;
  if (!o.expert_placement.empty()) {
    auto pr = runtime::apply_placement_file(model.gguf(), o.expert_placement);
    if (!pr) return report_error(pr.status());
    std::fprintf(stderr, "%s\n", pr->summary().c_str());
  }

  tokenizer::ChatTemplate tmpl = tokenizer::ChatTemplate::fallback();
  if (!o.chat_template_file.empty()) {
    auto text = read_text_file(o.chat_template_file);
    if (!text) return report_error("--chat-template-file: " + text.status().message());
    auto parsed = tokenizer::ChatTemplate::parse(*text);
    if (!parsed) return report_error("--chat-template-file: " + parsed.status().message());
    tmpl = std::move(parsed).value();
  } else if (auto src = model.gguf().get_string("tokenizer.chat_template")) {
    auto parsed = tokenizer::ChatTemplate::parse(*src);
    if (parsed)
      tmpl = std::move(parsed).value();
    else
      std::fprintf(stderr, "warning: cannot use the model's chat template (%s); using a plain format\n",
                   parsed.status().message().c_str());
  }

  server::Metrics metrics;
  server::EngineOptions eo;
  eo.n_ctx = resolve_ctx(model, o.n_ctx);
  eo.max_running = o.parallel;
  eo.mem_budget_bytes = (size_t)o.mem_budget_mb << 20;
  eo.prefill_chunk = o.prefill_chunk;
  eo.prefix_cache = !o.no_prefix_cache;
  eo.checkpoint_interval = o.checkpoint_interval;
  eo.max_queue = (size_t)o.max_queue;
  eo.kv_types = chosen_kv_types(model);
  server::Engine engine(model, &global_thread_pool(), eo, &metrics);

  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_keys = keys;
  so.shared_prefix_cache = o.cache_scope == "shared";
  so.diffusion = *diffusion;
  so.model_id = !o.alias.empty() ? o.alias : std::filesystem::path(o.model).stem().string();
  so.http_threads = o.http_threads > 0 ? o.http_threads : 2 * o.parallel + 32;
  so.max_body_bytes = (size_t)o.max_body_mb << 20;
  so.max_header_bytes = (size_t)o.max_header_bytes;
  so.max_connections = o.max_connections;
  so.max_buffered_bytes = (size_t)(o.max_buffered_mb > 0 ? o.max_buffered_mb : std::max<int64_t>(512, 4 * o.max_body_mb))
                          << 20;
  so.header_timeout_s = o.header_timeout;
  so.body_timeout_s = o.body_timeout;
  so.idle_timeout_s = o.idle_timeout;
  so.webui = !o.no_webui;

  if (Status s = engine.start(); !s) return report_error(s);
  server::HttpServer http(engine, metrics, std::move(tmpl), so);
  auto port = http.bind();
  if (!port) return report_error(port.status());
  std::fprintf(stderr,
               "chimera: serving '%s' (context %lld, parallel %d, state up to %.1f MiB each, allocated as tokens arrive; "
               "budget %.1f MiB)\n"
               "chimera: listening on http://%s:%d\n",
               so.model_id.c_str(), (long long)eo.n_ctx, eo.max_running, engine.state_bytes() / 1048576.0,
               engine.budget_bytes() / 1048576.0, o.host.c_str(), *port);
  if (so.webui) std::fprintf(stderr, "chimera: chat page at http://%s:%d/\n", o.host.c_str(), *port);
  std::fflush(stderr);

  std::atomic<bool> done{false};
  std::thread watcher([&] {
    timespec ts{0, 200 * 1000 * 1000};
    while (!done.load()) {
      if (sigtimedwait(&set, nullptr, &ts) > 0) {
        std::fprintf(stderr, "chimera: shutting down\n");
        http.stop();
        break;
      }
    }
  });
  http.run();
  done.store(true);
  watcher.join();
  engine.stop();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", o->port, "Port (0 = any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  add_ctx_option(sub, &o->n_ctx, "Context size per sequence (default 4096)");
  sub->add_option("--parallel", o->parallel, "Maximum sequences running at once")->capture_default_str();
  sub->add_option("--api-key", o->api_keys,
                  "Require 'Authorization: Bearer KEY' on every route but /health (repeat for several keys)")
      ->allow_extra_args(false);  // one key per --api-key
  sub->add_option("--api-key-file", o->api_key_file, "File with one API key per line (# comments)");
  sub->add_option("--prefix-cache-scope", o->cache_scope,
                  "Prefix-cache sharing: 'key' (per API key, default) or 'shared' (all keys); cache_salt partitions both")
      ->capture_default_str();
  sub->add_option("--mem-budget-mb", o->mem_budget_mb,
                  "Memory for sequence states + prefix cache (MiB; 0 = 2 x parallel states)")
      ->capture_default_str();
  sub->add_option("--chat-template-file", o->chat_template_file,
                  "Jinja chat template to use instead of the model's (HF tokenizer_config.json style)");
  sub->add_option("--alias", o->alias, "Model id reported by /v1/models (default: the file name)");
  sub->add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens processed per engine iteration")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)1, (int64_t)1 << 20));
  sub->add_option("--checkpoint-interval", o->checkpoint_interval,
                  "Recurrent models: prefix-cache checkpoint every N prompt tokens")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)1, (int64_t)1 << 30));
  sub->add_option("--max-queue", o->max_queue, "Requests waiting for a free sequence at most; beyond: 429")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)1, (int64_t)1 << 20));
  sub->add_option("--http-threads", o->http_threads, "HTTP worker threads (default 2 x parallel + 32)")
      ->check(CLI::Range(1, 4096));
  // Transport limits (docs/SERVER.md, "Security").
  sub->add_option("--max-body-mb", o->max_body_mb, "Largest request body, chunked too (MiB); larger: 413")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)1, (int64_t)4096));
  sub->add_option("--max-header-bytes", o->max_header_bytes, "Largest request line + headers; larger: 414/431")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)1024, (int64_t)1 << 20));
  sub->add_option("--max-connections", o->max_connections, "Open connections at most (beyond: idle ones are closed, else 503)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  sub->add_option("--max-buffered-mb", o->max_buffered_mb,
                  "Request data held by all connections together (MiB; default max(512, 4 x --max-body-mb)); beyond: 503")
      ->check(CLI::Range((int64_t)1, (int64_t)1 << 20));
  sub->add_option("--header-timeout", o->header_timeout, "Seconds to receive a request head (absolute); then 408")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_option("--body-timeout", o->body_timeout, "Seconds to receive a request body after its head (absolute); then 408")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_option("--idle-timeout", o->idle_timeout, "Seconds a kept-alive connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_flag("--no-prefix-cache", o->no_prefix_cache, "Disable prefix caching");
  sub->add_flag("--no-webui", o->no_webui, "Do not serve the browser chat page at GET / (then 404)");
  sub->add_option("--expert-placement", o->expert_placement,
                  "MoE models: keep the plan's resident experts in memory (`chimera experts --budget-gb` JSON)");
  o->compute.add_to(sub);
  o->diffusion.add_to(sub);
  sub->callback([o] { set_exit_code(run(*o)); });
}

}  // namespace chimera::cli
