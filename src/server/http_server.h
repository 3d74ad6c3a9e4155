// The HTTP front end of `chimera serve`: routes, API-key check, JSON
// validation, chat-template rendering and tokenisation, SSE streaming, on
// chimera's own HTTP/1.1 transport (http_transport.h: one event loop reads
// requests under absolute deadlines and size limits, workers run them).
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
// GET /health, GET /metrics, POST /tokenize, POST /detokenize, and the
// browser chat page (GET /, /webui/*; webui.h) unless disabled.
//
// Invariants: worker threads never touch the model — they render templates
// and tokenise (immutable, thread-safe objects), submit to the Engine and read
// the request's RequestChannel. Every error is an OpenAI-style JSON body with
// a 4xx/5xx status; no request can crash or wedge the server: bodies are size
// limited while read, the API key and the route are checked at the head
// (before a body is read), GET routes (/health) are answered by the event
// loop itself, every wait is bounded and re-checks the client, and a client
// that goes away (socket closed, or a failed SSE write) cancels its request so
// the engine frees the slot at its next iteration.
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
  int http_threads = 0;                  // worker threads; 0: 64
  size_t max_body_bytes = 16u << 20;     // decoded request body (chunked too)
  size_t max_header_bytes = 32u << 10;   // request line + headers
  int max_connections = 512;             // open sockets
  size_t max_buffered_bytes = 512u << 20;  // request bytes held by all connections together
  double header_timeout_s = 10;          // absolute: connection (or first byte) -> end of head
  double body_timeout_s = 60;            // absolute: end of head -> end of body
  double idle_timeout_s = 5;             // kept-alive connection between requests
  runtime::DiffusionOptions diffusion;   // diffusion LMs: defaults a request's JSON may override
  bool webui = true;                     // serve the chat page (GET /, /webui/*); false: those paths 404
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
