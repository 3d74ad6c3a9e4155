// The HTTP front end of `chimera serve` (cpp-httplib): routes, API-key check,
// JSON validation, chat-template rendering and tokenisation, SSE streaming.
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
// GET /health, GET /metrics, POST /tokenize, POST /detokenize.
//
// Invariants: handler threads never touch the model — they render templates
// and tokenise (immutable, thread-safe objects), submit to the Engine and read
// the request's RequestChannel. Every error is an OpenAI-style JSON body with
// a 4xx/5xx status; no request can crash or wedge the server: bodies are size
// limited, every wait is bounded and re-checks the client, and a client that
// goes away (a failed SSE write) cancels its request so the engine frees the
// slot at its next iteration. httplib types stay out of this header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/diffusion_options.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"

namespace chimera::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() returns it)
  std::vector<std::string> api_keys;     // empty = no authentication; else any of them (api_keys.h)
  // Prefix-cache scope: false = per API key (+ the request's cache_salt);
  // true = one cache for all keys (cache_salt still partitions it).
  bool shared_prefix_cache = false;
  std::string model_id = "chimera";      // the id /v1/models reports and requests may name
  int http_threads = 0;                  // 0: 2 x max running + 32
  size_t max_body_bytes = 16u << 20;
  runtime::DiffusionOptions diffusion;   // diffusion LMs: defaults a request's JSON may override
};

class HttpServer {
 public:
  HttpServer(Engine& engine, Metrics& metrics, tokenizer::ChatTemplate chat_template, ServerOptions opts);
  ~HttpServer();
  // Binds the listening socket; returns the port.
  Result<int> bind();
  // Serves until stop() (from any thread).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chimera::server
