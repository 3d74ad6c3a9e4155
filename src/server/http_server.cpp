// Routes and handlers of the OpenAI-compatible server; see http_server.h.
// Routing is two-step: on_head (event-loop thread) answers GET routes and
// refuses unknown routes, wrong methods and a missing API key before any
// body is read; the POST routes run on a worker once the body is complete.
// Generation requests wait on their RequestChannel (at most 250 ms at a
// time) and poll the client socket between waits: a non-streamed request
// whose client disconnected is cancelled (the engine frees the slot); a
// stream is cancelled on a failed write as well, and while nothing arrives for
// a second it writes an SSE comment. With active tools (tool_request.h) the
// reply's calls become message.tool_calls (with_tool_calls), and a stream
// holds back call text and ends with the tool_calls deltas (tool_stream_tail).
// With n > 1 choices every choice is handled as a one-choice response would
// be, then re-indexed (choices.h): events carry their choice's index, and the
// response ends once every choice's final event has arrived.
#include "server/http_server.h"

#include <atomic>
#include <ctime>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "server/api_keys.h"
#include "server/choices.h"
#include "server/http_transport.h"
#include "server/openai_json.h"
#include "server/prompt_builder.h"
#include "server/tool_request.h"
#include "server/tool_response.h"
#include "server/webui.h"

namespace chimera::server {
namespace {

using json = nlohmann::json;
constexpr auto kPoll = std::chrono::milliseconds(250);
constexpr int64_t kTokenizeContexts = 8;  // /tokenize refuses texts that prove more tokens than this many contexts

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

ApiError make_error(int status, std::string message, std::string type, std::string param = "", std::string code = "") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

HttpResponse error_response(const ApiError& e) { return json_response(e.status, error_body(e)); }

void send_json(HttpExchange& ex, int status, std::string body) { ex.respond(json_response(status, std::move(body))); }
void send_error(HttpExchange& ex, const ApiError& e) { ex.respond(error_response(e)); }

// A transport-level error (malformed request, limits, deadlines) as an OpenAI error body.
HttpResponse transport_error(int status, const std::string& message) {
  const char* type = status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error";
  return error_response(make_error(status, message, type));
}

enum class Route { kNone, kHealth, kMetrics, kModels, kCompletions, kChat, kTokenize, kDetokenize, kWebUi };

struct RouteInfo {
  const char* path;
  Route route;
  const char* method;
  bool guarded;  // needs the API key (when one is set)
};

constexpr RouteInfo kRoutes[] = {
    {"/health", Route::kHealth, "GET", false},
    {"/metrics", Route::kMetrics, "GET", true},
    {"/v1/models", Route::kModels, "GET", true},
    {"/v1/completions", Route::kCompletions, "POST", true},
    {"/v1/chat/completions", Route::kChat, "POST", true},
    {"/tokenize", Route::kTokenize, "POST", true},
    {"/detokenize", Route::kDetokenize, "POST", true},
};

// The chat page's assets (webui.h): public, like /health.
constexpr RouteInfo kWebUiRoute = {"", Route::kWebUi, "GET", false};

const RouteInfo* find_route(const std::string& path, bool webui) {
  for (const auto& r : kRoutes)
    if (path == r.path) return &r;
  if (webui && find_web_asset(path)) return &kWebUiRoute;
  return nullptr;
}

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  Metrics& metrics;
  tokenizer::ChatTemplate tmpl;
  ServerOptions opts;
  std::unique_ptr<HttpTransport> transport;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  int64_t created = (int64_t)std::time(nullptr);
  std::string bos, eos;
  std::shared_ptr<const tokenizer::ChatTemplate> tmpl_shared;  // outlives requests still in the engine
  ToolFormat tool_format = ToolFormat::kGeneric;               // the template's tool-call format

  Impl(Engine& e, Metrics& m, tokenizer::ChatTemplate t, ServerOptions o)
      : engine(e), metrics(m), tmpl(std::move(t)), opts(std::move(o)),
        tmpl_shared(std::make_shared<const tokenizer::ChatTemplate>(tmpl)) {
    const auto& tok = engine.tokenizer();
    if (tok.bos() >= 0) bos = tok.token_text(tok.bos());
    if (tok.eos() >= 0) eos = tok.token_text(tok.eos());
    tool_format = tool_format_for(tmpl);
  }

  void make_transport();
  std::optional<HttpResponse> on_head(const HttpRequest& head);
  void handle(const HttpRequest& req, HttpExchange& ex);
  void handle_generate(const HttpRequest& req, HttpExchange& ex, bool chat);
  void stream_response(HttpExchange& ex, RequestChannel& ch, const ResponseMeta& meta, bool include_usage,
                       const tokenizer::Tokenizer* logprobs_tok, const ToolSession& tools, int n);
  void handle_tokenize(const HttpRequest& req, HttpExchange& ex);
  void handle_detokenize(const HttpRequest& req, HttpExchange& ex);
  bool build_prompt(const ParsedRequest& pr, const HttpRequest& req, GenerationParams* gp, ApiError* err);
  bool authorized(const HttpRequest& head) const {
    return opts.api_keys.empty() || match_api_key(opts.api_keys, head.header("Authorization")) >= 0;
  }
};

bool HttpServer::Impl::build_prompt(const ParsedRequest& pr, const HttpRequest& req, GenerationParams* gp,
                                    ApiError* err) {
  PromptContext c;
  c.tok = &engine.tokenizer();
  c.tmpl = tmpl_shared;
  c.bos = bos;
  c.eos = eos;
  c.n_ctx = engine.n_ctx();
  c.is_diffusion = engine.info().is_diffusion;
  c.tool_format = tool_format;
  // The prefix-cache identity: the API key the request presented (its index),
  // unless the cache is shared across keys.
  std::string identity;
  if (!opts.api_keys.empty() && !opts.shared_prefix_cache)
    identity = "key" + std::to_string(match_api_key(opts.api_keys, req.header("Authorization")));
  return build_generation(c, pr, identity, gp, err);
}

void HttpServer::Impl::handle_generate(const HttpRequest& req, HttpExchange& ex, bool chat) {
  ParsedRequest pr;
  ApiError err;
  const RequestLimits lim{engine.n_ctx(), engine.info().n_vocab, opts.diffusion};
  if (!parse_generation_request(req.body, chat, lim, &pr, &err)) return send_error(ex, err);
  if (!pr.model.empty() && pr.model != opts.model_id)
    return send_error(ex, make_error(404, "The model '" + pr.model + "' does not exist; this server serves '" +
                                              opts.model_id + "'",
                                     "invalid_request_error", "model", "model_not_found"));
  GenerationParams gp;
  if (!build_prompt(pr, req, &gp, &err)) return send_error(ex, err);
  if (Status st = engine.check_choices(pr.n); !st)
    return send_error(ex, make_error(400, st.message(), "invalid_request_error", "n", "invalid_value"));
  gp.n = pr.n;
  auto sub = engine.submit(std::move(gp));
  if (!sub) {
    const Status& s = sub.status();
    if (s.code() == StatusCode::kOutOfRange)
      return send_error(ex, make_error(429, s.message(), "rate_limit_error", "", "too_many_requests"));
    if (s.code() == StatusCode::kInvalidArgument)
      return send_error(ex, make_error(400, s.message(), "invalid_request_error"));
    return send_error(ex, make_error(503, s.message(), "server_error", "", "unavailable"));
  }
  std::shared_ptr<RequestChannel> ch = *sub;
  ResponseMeta meta;
  char idbuf[32];
  std::snprintf(idbuf, sizeof idbuf, "%016llx", (unsigned long long)next_id.fetch_add(1));
  meta.id = std::string(chat ? "chatcmpl-" : "cmpl-") + idbuf;
  meta.created = (int64_t)std::time(nullptr);
  meta.model = opts.model_id;
  meta.chat = chat;
  const ToolSession tools{std::move(pr.tools), tool_format};
  if (pr.stream)
    return stream_response(ex, *ch, meta, pr.include_usage, pr.top_logprobs >= 0 ? &engine.tokenizer() : nullptr,
                           tools, pr.n);
  const size_t n = (size_t)pr.n;
  std::vector<std::string> text(n);
  std::vector<std::vector<TokenLogprob>> lps(n);
  std::vector<FinishReason> finish(n, FinishReason::kNone);
  std::vector<Usage> usage(n);
  size_t n_done = 0;
  std::vector<StreamEvent> evs;
  for (;;) {
    if (stopping.load()) ch->cancel();
    // A client that went away gets nothing: cancel, so the engine frees the slot.
    if (ex.client_gone()) return ch->cancel();
    evs.clear();
    if (!ch->pop(&evs, kPoll)) continue;
    for (auto& ev : evs) {
      const size_t i = (size_t)ev.index;
      if (i >= n) continue;
      text[i] += ev.text;
      for (auto& l : ev.logprobs) lps[i].push_back(std::move(l));
      if (!ev.done) continue;
      if (!ev.error.empty()) {
        ch->cancel();  // the other choices stop too
        return send_error(ex, make_error(500, "generation failed: " + ev.error, "server_error", "", "internal_error"));
      }
      finish[i] = ev.finish;
      usage[i] = ev.usage;
      if (++n_done < n) continue;
      const Usage total = request_usage(usage);
      std::vector<std::string> bodies;
      for (size_t c = 0; c < n; ++c)
        bodies.push_back(with_tool_calls(completion_body(meta, text[c], finish[c], total,
                                                         pr.top_logprobs >= 0 ? &lps[c] : nullptr, &engine.tokenizer()),
                                         text[c], tools));
      return send_json(ex, 200, n == 1 ? bodies[0] : join_choices(bodies));
    }
  }
}

void HttpServer::Impl::stream_response(HttpExchange& ex, RequestChannel& ch, const ResponseMeta& meta,
                                       bool include_usage, const tokenizer::Tokenizer* logprobs_tok,
                                       const ToolSession& tools, int n) {
  double last_write = now_seconds();
  auto write = [&](const std::string& data) {
    if (!ex.write("data: " + data + "\n\n")) return false;
    last_write = now_seconds();
    return true;
  };
  // Every early return below means the client is gone: the request is cancelled.
  struct CancelOnExit {
    RequestChannel& ch;
    ~CancelOnExit() { ch.cancel(); }  // a no-op for a request that already finished
  } guard{ch};
  if (!ex.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}))
    return;
  // A chunk of choice i (the builders make index 0).
  auto write_choice = [&](int i, const std::string& chunk) { return write(i ? with_choice_index(chunk, i) : chunk); };
  struct ChoiceState {
    int64_t text_offset = 0;  // completions logprobs: bytes streamed so far
    // Active tools: text that is or may become a call is held back and parsed at the end.
    std::optional<ToolStreamFilter> tool_filter;
    Usage usage;
  };
  std::vector<ChoiceState> choices((size_t)n);
  for (int i = 0; i < n; ++i) {
    if (meta.chat && !write_choice(i, chunk_body(meta, "", FinishReason::kNone, /*role_delta=*/true))) return;
    if (tools.req.active()) choices[(size_t)i].tool_filter.emplace(tools.format);
  }
  int n_done = 0;
  std::vector<StreamEvent> events;
  for (;;) {
    if (stopping.load()) ch.cancel();
    if (ex.client_gone()) return;
    events.clear();
    if (!ch.pop(&events, kPoll)) {
      if (now_seconds() - last_write > 1.0) {
        if (!ex.write(": keep-alive\n\n")) return;
        last_write = now_seconds();
      }
      continue;
    }
    for (auto& ev : events) {
      if (ev.index < 0 || ev.index >= n) continue;
      const int i = ev.index;
      ChoiceState& c = choices[(size_t)i];
      if (c.tool_filter) ev.text = c.tool_filter->feed(ev.text);
      const bool lp = logprobs_tok && !ev.logprobs.empty();
      if ((!ev.text.empty() || lp) &&
          !write_choice(i, chunk_body(meta, ev.text, FinishReason::kNone, false, lp ? &ev.logprobs : nullptr,
                                      logprobs_tok, &c.text_offset)))
        return;
      if (!ev.done) continue;
      if (!ev.error.empty()) {
        ApiError e = make_error(500, "generation failed: " + ev.error, "server_error", "", "internal_error");
        if (!write(error_body(e))) return;
        if (write("[DONE]")) ex.end_stream();
        return;  // the guard cancels the other choices
      }
      if (c.tool_filter) {
        for (const auto& chunk : tool_stream_tail(meta, *c.tool_filter, tools, ev.finish))
          if (!write_choice(i, chunk)) return;
      } else if (!write_choice(i, chunk_body(meta, "", ev.finish))) {
        return;
      }
      c.usage = ev.usage;
      if (++n_done < n) continue;
      std::vector<Usage> per_choice;
      for (const auto& s : choices) per_choice.push_back(s.usage);
      if (include_usage && !write(usage_chunk_body(meta, request_usage(per_choice)))) return;
      if (write("[DONE]")) ex.end_stream();
      return;
    }
  }
}

void HttpServer::Impl::handle_tokenize(const HttpRequest& req, HttpExchange& ex) {
  json b;
  ApiError err;
  if (!parse_json_object(req.body, &b, &err)) return send_error(ex, err);
  const char* key = b.contains("content") ? "content" : "prompt";
  auto it = b.find(key);
  if (it == b.end() || !it->is_string())
    return send_error(ex, make_error(400, "'content' (or 'prompt') must be a string", "invalid_request_error", key,
                                      "invalid_type"));
  bool add_special = true;
  if (auto a = b.find("add_special"); a != b.end() && !a->is_null()) {
    if (!a->is_boolean())
      return send_error(
          ex, make_error(400, "'add_special' must be a boolean", "invalid_request_error", "add_special", "invalid_type"));
    add_special = a->get<bool>();
  }
  bool parse_special = true;  // llama.cpp's /tokenize default
  if (auto a = b.find("parse_special"); a != b.end() && !a->is_null()) {
    if (!a->is_boolean())
      return send_error(ex, make_error(400, "'parse_special' must be a boolean", "invalid_request_error",
                                        "parse_special", "invalid_type"));
    parse_special = a->get<bool>();
  }
  // Counting is for prompts: a text whose size alone proves more than
  // kTokenizeContexts contexts of tokens is refused before it is tokenized.
  const std::string& text = it->get_ref<const std::string&>();
  const int64_t at_least = engine.tokenizer().min_tokens(text), cap = kTokenizeContexts * engine.n_ctx();
  if (at_least > cap)
    return send_error(ex, make_error(400,
                                      "the text has at least " + std::to_string(at_least) + " tokens; /tokenize counts at "
                                      "most " + std::to_string(cap) + " (" + std::to_string(kTokenizeContexts) +
                                      " contexts)",
                                      "invalid_request_error", key, "context_length_exceeded"));
  auto ids = engine.tokenizer().encode(text, add_special, parse_special);
  json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine.n_ctx()}};
  send_json(ex, 200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void HttpServer::Impl::handle_detokenize(const HttpRequest& req, HttpExchange& ex) {
  json b;
  ApiError err;
  if (!parse_json_object(req.body, &b, &err)) return send_error(ex, err);
  auto it = b.find("tokens");
  const int64_t nv = engine.info().n_vocab;
  if (it == b.end() || !it->is_array())
    return send_error(ex, make_error(400, "'tokens' must be an array of token ids", "invalid_request_error", "tokens",
                                      "invalid_type"));
  std::vector<int32_t> ids;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= nv)
      return send_error(ex, make_error(400, "'tokens' must hold integers in [0, " + std::to_string(nv) + ")",
                                        "invalid_request_error", "tokens", "invalid_value"));
    ids.push_back((int32_t)t.get<int64_t>());
  }
  const std::string text = engine.tokenizer().decode(ids, /*render_special=*/false);
  json out = {{"content", text}, {"prompt", text}};
  send_json(ex, 200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::optional<HttpResponse> HttpServer::Impl::on_head(const HttpRequest& head) {
  const RouteInfo* r = find_route(head.path, opts.webui);
  if (!r) return transport_error(404, "not found");
  if (head.method != r->method)
    return transport_error(405, "method " + head.method + " is not allowed on " + head.path + " (use " + r->method + ")");
  if (r->guarded && !authorized(head))
    return error_response(make_error(401, "Incorrect or missing API key (send 'Authorization: Bearer <key>')",
                                     "invalid_request_error", "", "invalid_api_key"));
  switch (r->route) {
    case Route::kHealth:
      return json_response(200, R"({"status":"ok"})");
    case Route::kMetrics: {
      HttpResponse m = json_response(200, metrics.render());
      m.content_type = "text/plain; version=0.0.4";
      return m;
    }
    case Route::kModels:
      return json_response(200, models_body(opts.model_id, created, engine.n_ctx(), engine.info().n_vocab));
    case Route::kWebUi:
      return web_asset_response(*find_web_asset(head.path), head.header("If-None-Match"));
    default:
      return std::nullopt;  // POST routes: read the body, then handle() on a worker
  }
}

void HttpServer::Impl::handle(const HttpRequest& req, HttpExchange& ex) {
  switch (find_route(req.path, opts.webui)->route) {
    case Route::kCompletions: return handle_generate(req, ex, false);
    case Route::kChat: return handle_generate(req, ex, true);
    case Route::kTokenize: return handle_tokenize(req, ex);
    case Route::kDetokenize: return handle_detokenize(req, ex);
    default: return send_error(ex, make_error(500, "unrouted request", "server_error"));
  }
}

void HttpServer::Impl::make_transport() {
  TransportOptions t;
  t.host = opts.host;
  t.port = opts.port;
  t.limits.max_body_bytes = opts.max_body_bytes;
  t.limits.max_head_bytes = opts.max_header_bytes;
  t.workers = opts.http_threads > 0 ? opts.http_threads : 64;
  t.max_connections = opts.max_connections;
  t.max_buffered_bytes = opts.max_buffered_bytes;
  t.header_timeout_s = opts.header_timeout_s;
  t.body_timeout_s = opts.body_timeout_s;
  t.idle_timeout_s = opts.idle_timeout_s;
  HttpHandlers h;
  h.on_head = [this](const HttpRequest& head) { return on_head(head); };
  h.handle = [this](const HttpRequest& req, HttpExchange& ex) { handle(req, ex); };
  h.error = transport_error;
  h.on_response = [this](int status) { metrics.count_http(status); };
  transport = std::make_unique<HttpTransport>(std::move(t), std::move(h));
}

HttpServer::HttpServer(Engine& engine, Metrics& metrics, tokenizer::ChatTemplate chat_template, ServerOptions opts)
    : impl_(std::make_unique<Impl>(engine, metrics, std::move(chat_template), std::move(opts))) {
  impl_->make_transport();
}

HttpServer::~HttpServer() { stop(); }

Result<int> HttpServer::bind() { return impl_->transport->bind(); }

void HttpServer::run() {
  if (impl_->stopping.load()) return;
  impl_->transport->run();
}

void HttpServer::stop() {
  impl_->stopping.store(true);
  impl_->transport->stop();
}

}  // namespace chimera::server
