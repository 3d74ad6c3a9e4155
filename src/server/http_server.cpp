// Routes and handlers of the OpenAI-compatible server; see http_server.h.
// Streaming uses cpp-httplib's chunked content provider: each call waits (at
// most 250 ms) for the request's events and writes them as SSE "data:" lines;
// while nothing arrives for a second it writes an SSE comment, so a client that
// disconnected while its request waits in the queue is noticed too. A failed
// write returns false (httplib closes the connection) and cancels the request;
// the provider's releaser cancels as well, which is a no-op for a request that
// already finished.
#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "server/openai_json.h"
#include "server/tool_response.h"

namespace chimera::server {
namespace {

using json = nlohmann::json;
constexpr auto kPoll = std::chrono::milliseconds(250);

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

ApiError make_error(int status, std::string message, std::string type, std::string param = "", std::string code = "") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

const char* status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "the request body is too large";
    case 414: return "the request URI is too long";
    default: return "request failed";
  }
}

struct StreamState {
  std::shared_ptr<RequestChannel> ch;
  ResponseMeta meta;
  bool include_usage = false;
  const tokenizer::Tokenizer* logprobs_tok = nullptr;  // set when the request asked for logprobs
  int64_t text_offset = 0;                             // completions logprobs: bytes streamed so far
  bool started = false;
  bool finished = false;
  double last_write = 0;
  std::vector<StreamEvent> events;
  std::shared_ptr<ToolStreamFilter> tool_filter;  // active tools: calls held back and parsed
  ToolSession tools;
};

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  Metrics& metrics;
  tokenizer::ChatTemplate tmpl;
  ServerOptions opts;
  httplib::Server srv;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  int listen_fd = -1;
  int64_t created = (int64_t)std::time(nullptr);
  std::string bos, eos;
  std::shared_ptr<const tokenizer::ChatTemplate> tmpl_shared;  // outlives requests still in the engine

  Impl(Engine& e, Metrics& m, tokenizer::ChatTemplate t, ServerOptions o)
      : engine(e), metrics(m), tmpl(std::move(t)), opts(std::move(o)),
        tmpl_shared(std::make_shared<const tokenizer::ChatTemplate>(tmpl)) {
    const auto& tok = engine.tokenizer();
    if (tok.bos() >= 0) bos = tok.token_text(tok.bos());
    if (tok.eos() >= 0) eos = tok.token_text(tok.eos());
  }

  void install_routes();
  void handle_generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream_response(httplib::Response& res, std::shared_ptr<StreamState> st);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  bool build_prompt(const ParsedRequest& pr, const ToolSession& tools, GenerationParams* gp, ApiError* err);

  // The API-key check runs inside the handler, after httplib has read the
  // body: a pre-routing rejection would leave the body unread on a keep-alive
  // connection and corrupt the next request.
  template <typename F>
  httplib::Server::Handler guarded(F fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      if (!opts.api_key.empty() && req.get_header_value("Authorization") != "Bearer " + opts.api_key)
        return send_error(res, make_error(401, "Incorrect or missing API key (send 'Authorization: Bearer <key>')",
                                          "invalid_request_error", "", "invalid_api_key"));
      fn(req, res);
    };
  }
};

bool HttpServer::Impl::build_prompt(const ParsedRequest& pr, const ToolSession& tools, GenerationParams* gp,
                                    ApiError* err) {
  const auto& tok = engine.tokenizer();
  if (pr.chat) {
    tokenizer::ChatRenderOptions ro;
    ro.add_generation_prompt = true;
    ro.bos_token = bos;
    ro.eos_token = eos;
    nlohmann::ordered_json messages;
    prepare_tool_render(pr.messages, tools.req, tools.format, &messages, &ro);  // tools: tool_request.h
    auto rendered = tmpl.render_json(messages, ro);
    if (!rendered) {
      *err = make_error(400, "cannot apply the chat template: " + rendered.status().message(),
                        "invalid_request_error", "messages", "invalid_value");
      return false;
    }
    // BOS: the vocabulary's rule, unless the template already wrote it.
    const bool add_special = !(!bos.empty() && rendered->compare(0, bos.size(), bos) == 0);
    gp->prompt = tok.encode(*rendered, add_special, /*parse_special=*/true);
    // The next turn's prompt starts with this conversation + the reply as the
    // template renders it: the engine snapshots the state there (engine.h).
    gp->turn_tokens = [t = tmpl_shared, msgs = messages, bos = bos, eos = eos, extra = ro.extra_context,
                       &tok](const std::string& reply) -> std::vector<int32_t> {
      nlohmann::ordered_json m = msgs;
      m.push_back({{"role", "assistant"}, {"content", reply}});
      tokenizer::ChatRenderOptions o;
      o.add_generation_prompt = false;
      o.bos_token = bos;
      o.eos_token = eos;
      o.extra_context = extra;
      auto r = t->render_json(m, o);
      if (!r) return {};
      const bool add = !(!bos.empty() && r->compare(0, bos.size(), bos) == 0);
      return tok.encode(*r, add, /*parse_special=*/true);
    };
  } else if (pr.prompt_text) {
    gp->prompt = tok.encode(*pr.prompt_text, /*add_special=*/true, /*parse_special=*/true);
  } else {
    gp->prompt = pr.prompt_ids;
  }
  const int64_t n_prompt = (int64_t)gp->prompt.size();
  const int64_t n_ctx = engine.n_ctx();
  if (n_prompt == 0) {
    *err = make_error(400, "the prompt is empty after tokenization", "invalid_request_error", "prompt", "invalid_value");
    return false;
  }
  if (n_prompt >= n_ctx) {
    *err = make_error(400,
                      "This model's maximum context length is " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                          std::to_string(n_prompt) + " tokens",
                      "invalid_request_error", pr.chat ? "messages" : "prompt", "context_length_exceeded");
    return false;
  }
  if (pr.max_tokens > 0 && n_prompt + pr.max_tokens > n_ctx) {
    *err = make_error(400,
                      "This model's maximum context length is " + std::to_string(n_ctx) + " tokens; you requested " +
                          std::to_string(n_prompt + pr.max_tokens) + " tokens (" + std::to_string(n_prompt) +
                          " in the prompt, " + std::to_string(pr.max_tokens) + " for the completion)",
                      "invalid_request_error", "max_tokens", "context_length_exceeded");
    return false;
  }
  gp->max_tokens = pr.max_tokens > 0 ? pr.max_tokens
                   : pr.chat         ? n_ctx - n_prompt
                                     : std::min<int64_t>(16, n_ctx - n_prompt);
  if (engine.info().is_diffusion && !resolve_diffusion_length(pr, n_ctx - n_prompt, &gp->max_tokens, err)) return false;
  gp->sampling = pr.sampling;
  gp->stop = pr.stop;
  gp->ignore_eos = pr.ignore_eos;
  gp->top_logprobs = pr.top_logprobs;
  gp->diffusion = pr.diffusion;
  gp->grammar = pr.grammar;
  return true;
}

void HttpServer::Impl::handle_generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  ParsedRequest pr;
  ApiError err;
  const RequestLimits lim{engine.n_ctx(), engine.info().n_vocab, opts.diffusion};
  if (!parse_generation_request(req.body, chat, lim, &pr, &err)) return send_error(res, err);
  if (!pr.model.empty() && pr.model != opts.model_id)
    return send_error(res, make_error(404, "The model '" + pr.model + "' does not exist; this server serves '" +
                                               opts.model_id + "'",
                                      "invalid_request_error", "model", "model_not_found"));
  ToolSession tools;
  if (!parse_tool_session(req.body, chat, tmpl, &tools, &err)) return send_error(res, err);
  GenerationParams gp;
  if (!build_prompt(pr, tools, &gp, &err)) return send_error(res, err);
  if (!apply_tool_generation(tools, &gp, &err)) return send_error(res, err);
  auto sub = engine.submit(std::move(gp));
  if (!sub) {
    const Status& s = sub.status();
    if (s.code() == StatusCode::kOutOfRange)
      return send_error(res, make_error(429, s.message(), "rate_limit_error", "", "too_many_requests"));
    if (s.code() == StatusCode::kInvalidArgument)
      return send_error(res, make_error(400, s.message(), "invalid_request_error"));
    return send_error(res, make_error(503, s.message(), "server_error", "", "unavailable"));
  }
  std::shared_ptr<RequestChannel> ch = *sub;
  ResponseMeta meta;
  char idbuf[32];
  std::snprintf(idbuf, sizeof idbuf, "%016llx", (unsigned long long)next_id.fetch_add(1));
  meta.id = std::string(chat ? "chatcmpl-" : "cmpl-") + idbuf;
  meta.created = (int64_t)std::time(nullptr);
  meta.model = opts.model_id;
  meta.chat = chat;
  if (pr.stream) {
    auto st = std::make_shared<StreamState>();
    st->ch = ch;
    st->meta = meta;
    st->include_usage = pr.include_usage;
    if (pr.top_logprobs >= 0) st->logprobs_tok = &engine.tokenizer();
    if (tools.req.active()) st->tool_filter = std::make_shared<ToolStreamFilter>(tools.format);
    st->tools = tools;
    return stream_response(res, st);
  }
  std::string text;
  std::vector<TokenLogprob> lps;
  std::vector<StreamEvent> evs;
  for (;;) {
    if (stopping.load()) ch->cancel();
    evs.clear();
    if (!ch->pop(&evs, kPoll)) continue;
    for (auto& ev : evs) {
      text += ev.text;
      for (auto& l : ev.logprobs) lps.push_back(std::move(l));
      if (!ev.done) continue;
      if (!ev.error.empty())
        return send_error(res, make_error(500, "generation failed: " + ev.error, "server_error", "", "internal_error"));
      return send_json(res, 200,
                       with_tool_calls(completion_body(meta, text, ev.finish, ev.usage,
                                                       pr.top_logprobs >= 0 ? &lps : nullptr, &engine.tokenizer()),
                                       text, tools));
    }
  }
}

void HttpServer::Impl::stream_response(httplib::Response& res, std::shared_ptr<StreamState> st) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  Impl* self = this;
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, self](size_t, httplib::DataSink& sink) -> bool {
        auto write = [&](const std::string& data) {
          const std::string line = "data: " + data + "\n\n";
          if (!sink.write(line.data(), line.size())) return false;
          st->last_write = now_seconds();
          return true;
        };
        auto abandon = [&] {
          st->ch->cancel();
          return false;
        };
        if (st->finished) {
          sink.done();
          return true;
        }
        if (!st->started) {
          st->started = true;
          st->last_write = now_seconds();
          if (st->meta.chat && !write(chunk_body(st->meta, "", FinishReason::kNone, /*role_delta=*/true)))
            return abandon();
        }
        if (self->stopping.load()) st->ch->cancel();
        st->events.clear();
        if (!st->ch->pop(&st->events, kPoll)) {
          if (now_seconds() - st->last_write > 1.0) {
            static const char kKeepAlive[] = ": keep-alive\n\n";
            if (!sink.write(kKeepAlive, sizeof kKeepAlive - 1)) return abandon();
            st->last_write = now_seconds();
          }
          return true;
        }
        for (auto& ev : st->events) {
          if (st->tool_filter) ev.text = st->tool_filter->feed(ev.text);
          const bool lp = st->logprobs_tok && !ev.logprobs.empty();
          if ((!ev.text.empty() || lp) &&
              !write(chunk_body(st->meta, ev.text, FinishReason::kNone, false, lp ? &ev.logprobs : nullptr,
                                st->logprobs_tok, &st->text_offset)))
            return abandon();
          if (!ev.done) continue;
          if (!ev.error.empty()) {
            ApiError e = make_error(500, "generation failed: " + ev.error, "server_error", "", "internal_error");
            if (!write(error_body(e))) return abandon();
          } else if (st->tool_filter) {
            for (const auto& c : tool_stream_tail(st->meta, *st->tool_filter, st->tools, ev.finish))
              if (!write(c)) return abandon();
            if (st->include_usage && !write(usage_chunk_body(st->meta, ev.usage))) return abandon();
          } else {
            if (!write(chunk_body(st->meta, "", ev.finish))) return abandon();
            if (st->include_usage && !write(usage_chunk_body(st->meta, ev.usage))) return abandon();
          }
          if (!write("[DONE]")) return abandon();
          st->finished = true;
          sink.done();
          return true;
        }
        return true;
      },
      [st](bool) { st->ch->cancel(); });
}

void HttpServer::Impl::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  json b;
  ApiError err;
  if (!parse_json_object(req.body, &b, &err)) return send_error(res, err);
  const char* key = b.contains("content") ? "content" : "prompt";
  auto it = b.find(key);
  if (it == b.end() || !it->is_string())
    return send_error(res, make_error(400, "'content' (or 'prompt') must be a string", "invalid_request_error", key,
                                      "invalid_type"));
  bool add_special = true;
  if (auto a = b.find("add_special"); a != b.end() && !a->is_null()) {
    if (!a->is_boolean())
      return send_error(
          res, make_error(400, "'add_special' must be a boolean", "invalid_request_error", "add_special", "invalid_type"));
    add_special = a->get<bool>();
  }
  auto ids = engine.tokenizer().encode(it->get<std::string>(), add_special, /*parse_special=*/true);
  json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine.n_ctx()}};
  send_json(res, 200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void HttpServer::Impl::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  json b;
  ApiError err;
  if (!parse_json_object(req.body, &b, &err)) return send_error(res, err);
  auto it = b.find("tokens");
  const int64_t nv = engine.info().n_vocab;
  if (it == b.end() || !it->is_array())
    return send_error(res, make_error(400, "'tokens' must be an array of token ids", "invalid_request_error", "tokens",
                                      "invalid_type"));
  std::vector<int32_t> ids;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= nv)
      return send_error(res, make_error(400, "'tokens' must hold integers in [0, " + std::to_string(nv) + ")",
                                        "invalid_request_error", "tokens", "invalid_value"));
    ids.push_back((int32_t)t.get<int64_t>());
  }
  const std::string text = engine.tokenizer().decode(ids, /*render_special=*/false);
  json out = {{"content", text}, {"prompt", text}};
  send_json(res, 200, out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void HttpServer::Impl::install_routes() {
  const int n_threads = opts.http_threads > 0 ? opts.http_threads : 64;
  srv.new_task_queue = [n_threads] { return new httplib::ThreadPool((size_t)n_threads); };
  // httplib's default sets SO_REUSEPORT (a second server could silently share
  // the port); take plain SO_REUSEADDR and remember the socket to widen the
  // listen backlog (httplib uses 5, too few for bursts of clients) after bind.
  srv.set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  srv.set_tcp_nodelay(true);  // SSE chunks are small: no Nagle / delayed-ACK stalls
  srv.set_payload_max_length(opts.max_body_bytes);
  srv.set_read_timeout(30, 0);
  srv.set_write_timeout(30, 0);
  srv.set_keep_alive_max_count(10000);
  srv.set_keep_alive_timeout(5);

  srv.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // our own error body
    send_error(res, make_error(res.status, status_text(res.status),
                               res.status == 404 ? "not_found_error" : "invalid_request_error"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  srv.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, make_error(500, what, "server_error", "", "internal_error"));
  });
  srv.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics.count_http(res.status); });

  srv.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, R"({"status":"ok"})");
  });
  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
  });
  srv.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_body(opts.model_id, created, engine.n_ctx(), engine.info().n_vocab));
  }));
  srv.Post("/v1/completions", guarded([this](const auto& req, auto& res) { handle_generate(req, res, false); }));
  srv.Post("/v1/chat/completions", guarded([this](const auto& req, auto& res) { handle_generate(req, res, true); }));
  srv.Post("/tokenize", guarded([this](const auto& req, auto& res) { handle_tokenize(req, res); }));
  srv.Post("/detokenize", guarded([this](const auto& req, auto& res) { handle_detokenize(req, res); }));
}

HttpServer::HttpServer(Engine& engine, Metrics& metrics, tokenizer::ChatTemplate chat_template, ServerOptions opts)
    : impl_(std::make_unique<Impl>(engine, metrics, std::move(chat_template), std::move(opts))) {
  impl_->install_routes();
}

HttpServer::~HttpServer() { stop(); }

Result<int> HttpServer::bind() {
  const ServerOptions& o = impl_->opts;
  int port = o.port;
  if (o.port == 0) {
    port = impl_->srv.bind_to_any_port(o.host);
    if (port <= 0) return io_error("cannot listen on " + o.host + " (any port)");
  } else {
    if (o.port < 0 || o.port > 65535) return invalid_argument("port " + std::to_string(o.port) + " is out of range");
    if (!impl_->srv.bind_to_port(o.host, o.port))
      return io_error("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (in use or not permitted)");
  }
  if (impl_->listen_fd >= 0) ::listen(impl_->listen_fd, 1024);  // re-listen only resizes the backlog
  return port;
}

void HttpServer::run() {
  if (impl_->stopping.load()) return;
  impl_->srv.listen_after_bind();
}

void HttpServer::stop() {
  impl_->stopping.store(true);
  impl_->srv.stop();
}

}  // namespace chimera::server
