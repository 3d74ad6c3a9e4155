// The HTTP/1.1 transport of `chimera serve`: one event-loop thread (epoll)
// accepts connections and reads request heads and bodies under absolute
// deadlines; only complete requests go to a pool of worker threads. Routes
// live in http_server.cpp; this file knows nothing about them.
//
// Guarantees (docs/SERVER.md, "Security"):
// - A slow or stalled client never holds a worker: the head must arrive within
//   header_timeout_s of the connection (or of its first byte on a kept-alive
//   connection), the body within body_timeout_s of the head — deadlines are
//   absolute, not reset per byte; violations get 408 and the connection closes.
// - Bodies are limited while they are read (chunked too) and a head can be
//   answered before its body is read (on_head: unknown route, missing API key,
//   /health), which then closes the connection after the answer.
// - At most max_connections sockets are open; at the cap a kept-alive idle
//   connection is closed to make room, else the new one gets 503 and closes.
// - Request bytes held by all connections together (bodies being read, and
//   those of requests queued or running) stay under max_buffered_bytes: a body
//   that would pass it gets 503 and its connection closes.
// - Pipelined requests are answered in order: a connection has at most one
//   request in a worker; bytes after it wait in its buffer (bounded) or the
//   kernel until the answer is written.
// - While a worker runs a request, the handler can ask client_gone() (the
//   peer closed or reset the socket) and cancel its work.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "server/http_parser.h"

namespace chimera::server {

struct TransportOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port
  HttpLimits limits;
  int workers = 64;                 // threads running complete requests
  int max_connections = 512;        // open sockets (reading, queued, running, writing)
  size_t max_buffered_bytes = 512u << 20;  // request bytes held by all connections together
  double header_timeout_s = 10;     // accept (or a kept-alive request's first byte) -> end of head
  double body_timeout_s = 60;       // end of head -> end of body
  double idle_timeout_s = 5;        // kept-alive connection waiting for its next request
  double write_timeout_s = 30;      // a whole response (streams: each write)
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// One request on a worker thread: send a whole response, or stream one.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual void respond(HttpResponse r) = 0;
  // Streaming: the head (chunked transfer encoding), then pieces; false once
  // the client is gone (the stream is then over; end_stream is a no-op).
  virtual bool begin_stream(int status, const std::string& content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers) = 0;
  virtual bool write(std::string_view data) = 0;
  virtual void end_stream() = 0;
  // The peer closed or reset its end (polled, never blocks).
  virtual bool client_gone() = 0;
  // The server is shutting down.
  virtual bool stopping() const = 0;
};

struct HttpHandlers {
  // Event-loop thread, once the head is parsed; must be cheap. A response
  // ends the request there (a body, if one follows, is not read).
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> on_head;
  // Worker thread, a complete request.
  std::function<void(const HttpRequest& req, HttpExchange& ex)> handle;
  // The body of a transport-level error (400, 408, 413, 431, 503, ...).
  std::function<HttpResponse(int status, const std::string& message)> error;
  // Every response head written (metrics).
  std::function<void(int status)> on_response;
};

class HttpTransport {
 public:
  HttpTransport(TransportOptions opts, HttpHandlers handlers);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;
  // Binds and listens; returns the port.
  Result<int> bind();
  // Serves until stop() (from any thread); returns once every worker is done.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "HTTP/1.1 200 OK\r\n..." with Content-Length and Connection headers.
std::string serialize_response(const HttpResponse& r, bool keep_alive);

}  // namespace chimera::server
