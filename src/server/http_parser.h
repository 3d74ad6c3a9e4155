// Incremental HTTP/1.1 request parser for `chimera serve` (pure: no sockets).
// Bytes are fed as they arrive; the parser stops after one complete request
// (the caller keeps the rest of its buffer for the next, pipelined request).
//
// Invariants: every input either parses or ends in an error with an HTTP
// status (400, 408 is the caller's, 413, 414, 431, 501, 505) — never a crash,
// an unbounded allocation or a wait for bytes that cannot make the request
// valid. Memory is bounded by the limits: the head (request line + headers,
// and the chunked trailer) by max_head_bytes, the body by max_body_bytes,
// counted as it is decoded, so a chunked upload is refused as soon as it
// passes the limit, never read whole. A Content-Length over the limit is
// refused at the head. Request smuggling shapes are refused: Content-Length
// together with Transfer-Encoding, differing duplicate Content-Lengths, a
// transfer coding other than "chunked", whitespace before a header colon,
// control characters in the head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chimera::server {

struct HttpLimits {
  size_t max_head_bytes = 32u << 10;   // request line + headers (and a chunked trailer)
  size_t max_headers = 100;
  size_t max_body_bytes = 16u << 20;   // decoded body
};

struct HttpRequest {
  std::string method;   // as sent (methods are case-sensitive)
  std::string target;   // request-target as sent ("/v1/models?x=1")
  std::string path;     // target up to '?'
  int minor_version = 1;  // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed
  std::string body;
  bool chunked = false;
  uint64_t content_length = 0;  // declared (0 when absent or chunked)
  bool keep_alive = true;       // HTTP/1.1 unless "Connection: close"; 1.0 only with "keep-alive"
  bool expect_continue = false; // "Expect: 100-continue"

  // First value of a header (case-insensitive name); "" when absent.
  std::string_view header(std::string_view name) const;
  bool has_body() const { return chunked || content_length > 0; }
};

class HttpParser {
 public:
  enum class State { kHead, kBody, kDone, kError };

  explicit HttpParser(HttpLimits lim = {}) : lim_(lim) {}

  // Consumes bytes; returns how many were used (fewer than n once the
  // request is done or failed). After the head is parsed state() is kBody (or
  // kDone for a request without a body) and request() holds the head.
  size_t feed(const char* data, size_t n);
  State state() const { return state_; }
  bool head_done() const { return state_ == State::kBody || state_ == State::kDone; }
  // True once any byte of this request has been consumed.
  bool started() const { return started_; }
  const HttpRequest& request() const { return req_; }
  HttpRequest& request() { return req_; }
  int error_status() const { return err_status_; }
  const std::string& error_message() const { return err_msg_; }
  // Ready for the next request on the same connection.
  void reset();

 private:
  enum class Body { kFixed, kChunkSize, kChunkData, kChunkDataEnd, kTrailer };
  size_t feed_head(const char* data, size_t n);
  size_t feed_body(const char* data, size_t n);
  bool parse_head();
  bool fail(int status, std::string msg);
  // Appends to line_ up to and including '\n'; true once a line is complete.
  bool take_line(const char* data, size_t n, size_t* used, size_t max_len, int too_long_status);

  HttpLimits lim_;
  State state_ = State::kHead;
  Body body_state_ = Body::kFixed;
  HttpRequest req_;
  std::string head_;   // the head so far
  std::string line_;   // chunk-size / trailer line so far
  uint64_t remaining_ = 0;  // bytes left in the fixed body or the current chunk
  size_t trailer_bytes_ = 0;
  bool started_ = false;
  int err_status_ = 0;
  std::string err_msg_;
};

// Standard reason phrase ("Not Found"); "Unknown" for codes it does not know.
const char* http_reason(int status);

}  // namespace chimera::server
