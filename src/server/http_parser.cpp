// HTTP/1.1 request parsing (RFC 9112 subset); see http_parser.h.
#include "server/http_parser.h"

#include <algorithm>
#include <cstring>

namespace chimera::server {
namespace {

constexpr size_t kMaxChunkLine = 1024;  // chunk size + extensions

bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
    if (x >= 'A' && x <= 'Z') x = (unsigned char)(x | 0x20);
    if (y >= 'A' && y <= 'Z') y = (unsigned char)(y | 0x20);
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn(token) for each trimmed, non-empty element of a comma list.
template <typename F>
void for_each_token(std::string_view v, F fn) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    std::string_view t = trim(v.substr(0, comma));
    if (!t.empty()) fn(t);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool HttpParser::fail(int status, std::string msg) {
  state_ = State::kError;
  err_status_ = status;
  err_msg_ = std::move(msg);
  return false;
}

void HttpParser::reset() {
  state_ = State::kHead;
  body_state_ = Body::kFixed;
  req_ = HttpRequest();
  head_.clear();
  line_.clear();
  remaining_ = 0;
  trailer_bytes_ = 0;
  started_ = false;
  err_status_ = 0;
  err_msg_.clear();
}

size_t HttpParser::feed(const char* data, size_t n) {
  size_t used = 0;
  while (used < n && (state_ == State::kHead || state_ == State::kBody)) {
    used += state_ == State::kHead ? feed_head(data + used, n - used) : feed_body(data + used, n - used);
  }
  return used;
}

size_t HttpParser::feed_head(const char* data, size_t n) {
  size_t i = 0;
  for (; i < n; ++i) {
    const char c = data[i];
    started_ = true;
    // Empty lines before the request line are skipped (RFC 9112 2.2), a bounded number of them.
    if (head_.empty() && (c == '\r' || c == '\n')) {
      if (++trailer_bytes_ > lim_.max_head_bytes) return fail(400, "too many empty lines before the request"), i + 1;
      continue;
    }
    head_.push_back(c);
    if (head_.size() > lim_.max_head_bytes) {
      const bool in_request_line = head_.find('\n') == std::string::npos;
      return fail(in_request_line ? 414 : 431,
                  in_request_line ? "the request line is too long" : "the request headers are too large"),
             i + 1;
    }
    if (c != '\n') continue;
    const size_t k = head_.size();
    const bool end = (k >= 2 && head_[k - 2] == '\n') || (k >= 3 && head_[k - 2] == '\r' && head_[k - 3] == '\n');
    if (!end) continue;
    trailer_bytes_ = 0;
    if (!parse_head()) return i + 1;
    return i + 1;
  }
  return i;
}

bool HttpParser::parse_head() {
  std::vector<std::string_view> lines;
  std::string_view h(head_);
  while (!h.empty()) {
    const size_t nl = h.find('\n');
    std::string_view line = h.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return fail(400, "bare CR in the request head");
    if (line.empty()) break;  // the blank line ending the head
    lines.push_back(line);
    h.remove_prefix(nl + 1);
  }
  if (lines.empty()) return fail(400, "empty request");
  // Request line: method SP request-target SP HTTP-version.
  const std::string_view rl = lines[0];
  const size_t s1 = rl.find(' ');
  const size_t s2 = s1 == std::string_view::npos ? s1 : rl.find(' ', s1 + 1);
  if (s2 == std::string_view::npos || rl.find(' ', s2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line");
  const std::string_view method = rl.substr(0, s1), target = rl.substr(s1 + 1, s2 - s1 - 1),
                         version = rl.substr(s2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), [](char c) { return is_tchar((unsigned char)c); }))
    return fail(400, "malformed request method");
  if (target.empty() || target[0] != '/' ||
      std::any_of(target.begin(), target.end(), [](char c) { return (unsigned char)c <= 0x20 || c == 0x7f; }))
    return fail(400, "malformed request target (an absolute path is expected)");
  if (version.size() != 8 || version.compare(0, 5, "HTTP/") != 0 || version[6] != '.' ||
      !(version[5] >= '0' && version[5] <= '9') || !(version[7] >= '0' && version[7] <= '9'))
    return fail(400, "malformed HTTP version");
  if (version[5] != '1') return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  req_.method = std::string(method);
  req_.target = std::string(target);
  req_.path = std::string(target.substr(0, target.find('?')));
  req_.minor_version = version[7] - '0';
  req_.keep_alive = req_.minor_version >= 1;

  if (lines.size() - 1 > lim_.max_headers) return fail(431, "too many request headers");
  bool have_cl = false, have_te = false, saw_close = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line[0] == ' ' || line[0] == '\t') return fail(400, "obsolete header line folding");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail(400, "malformed header line");
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), [](char c) { return is_tchar((unsigned char)c); }))
      return fail(400, "malformed header name");
    const std::string_view value = trim(line.substr(colon + 1));
    for (char c : value)
      if (((unsigned char)c < 0x20 && c != '\t') || c == 0x7f) return fail(400, "control character in a header value");
    req_.headers.emplace_back(std::string(name), std::string(value));

    if (iequals(name, "Content-Length")) {
      if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return fail(400, "invalid Content-Length '" + std::string(value.substr(0, 32)) + "'");
      uint64_t v = 0;
      bool huge = false;
      for (char c : value) {
        if (v > (UINT64_MAX - 9) / 10) huge = true;
        if (!huge) v = v * 10 + (uint64_t)(c - '0');
      }
      if (have_cl && v != req_.content_length) return fail(400, "conflicting Content-Length headers");
      if (huge || v > lim_.max_body_bytes)
        return fail(413, "the request body (Content-Length " + std::string(value) + ") exceeds the limit of " +
                             std::to_string(lim_.max_body_bytes) + " bytes");
      have_cl = true;
      req_.content_length = v;
    } else if (iequals(name, "Transfer-Encoding")) {
      bool ok = !have_te;
      int n = 0;
      for_each_token(value, [&](std::string_view t) { ok = ok && ++n == 1 && iequals(t, "chunked"); });
      if (!ok || n != 1) return fail(501, "unsupported Transfer-Encoding (only 'chunked' is)");
      have_te = true;
    } else if (iequals(name, "Connection")) {
      for_each_token(value, [&](std::string_view t) {
        if (iequals(t, "close")) saw_close = true;
        if (iequals(t, "keep-alive") && req_.minor_version == 0) req_.keep_alive = true;
      });
    } else if (iequals(name, "Expect")) {
      if (!iequals(value, "100-continue")) return fail(417, "unsupported Expect header");
      req_.expect_continue = true;
    }
  }
  if (have_te && have_cl) return fail(400, "both Content-Length and Transfer-Encoding");
  if (have_te && req_.minor_version == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (saw_close) req_.keep_alive = false;  // "close" wins over any "keep-alive"
  req_.chunked = have_te;
  head_.clear();
  head_.shrink_to_fit();
  if (req_.chunked) {
    body_state_ = Body::kChunkSize;
    state_ = State::kBody;
  } else if (req_.content_length > 0) {
    body_state_ = Body::kFixed;
    remaining_ = req_.content_length;
    req_.body.reserve((size_t)std::min<uint64_t>(req_.content_length, 1u << 20));
    state_ = State::kBody;
  } else {
    state_ = State::kDone;
  }
  return true;
}

bool HttpParser::take_line(const char* data, size_t n, size_t* used, size_t max_len, int too_long_status) {
  // The line with its CR LF may take max_len + 2 bytes: its '\n' must come
  // within the next `room` bytes (the same verdict however input is split).
  const size_t room = max_len + 2 - line_.size();
  const void* nl = std::memchr(data, '\n', std::min(n, room));
  if (!nl) {
    if (n >= room) {
      *used = room;
      return fail(too_long_status, too_long_status == 431 ? "the chunked trailer is too large" : "chunk line too long");
    }
    line_.append(data, n);
    *used = n;
    return false;
  }
  const size_t take = (size_t)((const char*)nl - data) + 1;
  line_.append(data, take);
  *used = take;
  line_.pop_back();
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

size_t HttpParser::feed_body(const char* data, size_t n) {
  if (body_state_ == Body::kFixed || body_state_ == Body::kChunkData) {
    const size_t take = (size_t)std::min<uint64_t>(remaining_, n);
    req_.body.append(data, take);
    remaining_ -= take;
    if (remaining_ == 0) {
      if (body_state_ == Body::kFixed)
        state_ = State::kDone;
      else
        body_state_ = Body::kChunkDataEnd;
    }
    return take;
  }
  size_t used = 0;
  const size_t max_len = body_state_ == Body::kTrailer ? lim_.max_head_bytes : kMaxChunkLine;
  const int too_long = body_state_ == Body::kTrailer ? 431 : 400;
  if (!take_line(data, n, &used, max_len, too_long)) return used;
  std::string line = std::move(line_);
  line_.clear();
  switch (body_state_) {
    case Body::kChunkDataEnd:
      if (!line.empty()) return fail(400, "chunk data longer than its declared size"), used;
      body_state_ = Body::kChunkSize;
      break;
    case Body::kChunkSize: {
      uint64_t size = 0;
      size_t i = 0, digits = 0;
      for (; i < line.size(); ++i) {
        const int d = hex_value(line[i]);
        if (d < 0) break;
        if (size != 0 || d != 0) ++digits;
        if (digits > 15) break;
        size = size * 16 + (uint64_t)d;
      }
      if (i == 0) return fail(400, "malformed chunk size"), used;
      if (digits > 15) return fail(413, "the chunk size is absurd"), used;
      // What follows the size: optional whitespace, then extensions (';...'), which are ignored.
      size_t j = i;
      while (j < line.size() && (line[j] == ' ' || line[j] == '\t')) ++j;
      if (j < line.size() && line[j] != ';') return fail(400, "malformed chunk size"), used;
      if (size > lim_.max_body_bytes - req_.body.size())
        return fail(413, "the request body exceeds the limit of " + std::to_string(lim_.max_body_bytes) + " bytes"),
               used;
      if (size == 0) {
        body_state_ = Body::kTrailer;
      } else {
        remaining_ = size;
        body_state_ = Body::kChunkData;
      }
      break;
    }
    case Body::kTrailer:
      trailer_bytes_ += line.size() + 2;
      if (trailer_bytes_ > lim_.max_head_bytes) return fail(431, "the chunked trailer is too large"), used;
      if (line.empty()) state_ = State::kDone;  // trailer fields are ignored
      break;
    default:
      break;
  }
  return used;
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace chimera::server
