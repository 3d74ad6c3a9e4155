// The HTTP/1.1 event loop and worker pool; see http_transport.h.
//
// A connection is in one phase at a time, owned by one thread:
//   kRead   (loop)   bytes -> parser; stage kIdle / kHead / kBody sets the deadline
//   kWork   (worker) the fd is out of the epoll set; the worker may stream on it
//   kWrite  (loop)   a whole response is flushed with EPOLLOUT
//   kLinger (loop)   after a closing answer: write side shut, input drained
//                    (at most kLingerSeconds) so unread request bytes do not
//                    turn the close into a reset that destroys the answer
// Workers hand a connection back through a queue + eventfd. The loop sweeps
// deadlines every kSweepMs.
#include "server/http_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace chimera::server {
namespace {

constexpr int kSweepMs = 100;
constexpr double kLingerSeconds = 2.0;
constexpr size_t kReadChunk = 64u << 10;
constexpr size_t kMaxReadPerWake = 1u << 20;  // fairness between connections
constexpr uint64_t kMaxSkippedBody = 64u << 10;  // a refused request's body read to keep the connection

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Writes all of data before `deadline` (absolute, now_s clock). False on error or timeout.
bool write_all(int fd, std::string_view data, double deadline) {
  while (!data.empty()) {
    const ssize_t k = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (k > 0) {
      data.remove_prefix((size_t)k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const double left = deadline - now_s();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR) return false;
      if (p.revents & (POLLERR | POLLHUP)) return false;
      continue;
    }
    return false;
  }
  return true;
}

std::string chunk_frame(std::string_view data) {
  char hex[20];
  const int n = std::snprintf(hex, sizeof hex, "%zx\r\n", data.size());
  std::string out;
  out.reserve((size_t)n + data.size() + 2);
  out.append(hex, (size_t)n);
  out.append(data);
  out.append("\r\n");
  return out;
}

}  // namespace

std::string serialize_response(const HttpResponse& r, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + http_reason(r.status) + "\r\n";
  if (!r.content_type.empty()) out += "Content-Type: " + r.content_type + "\r\n";
  if (r.status != 304) out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";  // 304: no body, no length
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  out += r.body;
  return out;
}

namespace {

struct Conn {
  enum class Phase { kRead, kWork, kWrite, kLinger };
  enum class Stage { kIdle, kHead, kBody };
  int fd = -1;
  Phase phase = Phase::kRead;
  Stage stage = Stage::kHead;
  double deadline = 0;
  HttpParser parser;
  bool head_checked = false;
  std::optional<HttpResponse> early;  // answered at the head; sent once the small body is read
  size_t charged = 0;                 // bytes counted in Impl::buffered
  std::string in;   // received, not yet parsed (the start of a pipelined request)
  std::string out;  // kWrite: response bytes
  size_t out_off = 0;
  bool close_after = false;
  explicit Conn(const HttpLimits& lim) : parser(lim) {}
};

struct Completion {
  Conn* conn;
  std::string bytes;  // a whole response to write (empty: already written / nothing to send)
  bool close_after;
};

}  // namespace

struct HttpTransport::Impl {
  TransportOptions opts;
  HttpHandlers h;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  int n_working = 0;
  size_t buffered = 0;  // request bytes held for reading and queued/running connections (Conn::charged)
  bool listener_paused = false;

  // Worker queue.
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<std::pair<Conn*, HttpRequest>> jobs;
  bool jobs_closed = false;
  std::vector<std::thread> workers;

  // Completions back to the loop.
  std::mutex done_mu;
  std::deque<Completion> done;

  Impl(TransportOptions o, HttpHandlers hh) : opts(std::move(o)), h(std::move(hh)) {}
  ~Impl() {
    for (auto& [fd, c] : conns) ::close(fd);
    if (listen_fd >= 0) ::close(listen_fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t k = ::write(wake_fd, &one, sizeof one);
  }
  void watch(Conn& c, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;  // no EPOLLRDHUP: level-triggered, it would spin while a reply waits for EPOLLOUT
    ev.data.fd = c.fd;
    ::epoll_ctl(epoll_fd, op, c.fd, &ev);
  }
  // Accounts c's buffered request bytes (body + unparsed input) in `buffered`.
  void charge(Conn& c, size_t bytes) {
    buffered = buffered - c.charged + bytes;
    c.charged = bytes;
  }
  void close_conn(Conn& c) {
    charge(c, 0);
    const int fd = c.fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);  // destroys c
  }

  void loop();
  void accept_all();
  void on_readable(Conn& c);
  void advance(Conn& c);
  void enter_read(Conn& c, double now);
  void respond(Conn& c, const HttpResponse& r, bool close_after);
  void start_write(Conn& c, std::string bytes, bool close_after);
  void flush(Conn& c);
  void start_linger(Conn& c);
  void drain_linger(Conn& c);
  void dispatch(Conn& c);
  void take_completions();
  void sweep(double now);
  void worker_main();
};

// ---------------------------------------------------------------- worker side

namespace {

class Exchange final : public HttpExchange {
 public:
  Exchange(const TransportOptions& opts, const HttpHandlers& h, const std::atomic<bool>& stopping, Conn& c,
           bool keep_alive, bool http10)
      : opts_(opts), h_(h), stopping_(stopping), c_(c), keep_alive_(keep_alive), http10_(http10) {}

  void respond(HttpResponse r) override {
    if (responded_) return;
    responded_ = true;
    if (h_.on_response) h_.on_response(r.status);
    bytes_ = serialize_response(r, keep_alive_);
  }
  bool begin_stream(int status, const std::string& content_type,
                    const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (responded_) return false;
    responded_ = streamed_ = true;
    if (h_.on_response) h_.on_response(status);
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
    head += "Content-Type: " + content_type + "\r\n";
    for (const auto& [k, v] : headers) head += k + ": " + v + "\r\n";
    // HTTP/1.0 has no chunked coding: the stream ends with the connection.
    head += http10_ ? "Connection: close\r\n\r\n" : "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";
    return put(head);
  }
  bool write(std::string_view data) override {
    if (!streamed_ || failed_ || ended_) return false;
    if (data.empty()) return true;
    return http10_ ? put(data) : put(chunk_frame(data));
  }
  void end_stream() override {
    if (!streamed_ || failed_ || ended_) return;
    ended_ = true;
    if (!http10_) put("0\r\n\r\n");
  }
  bool client_gone() override {
    if (failed_) return true;
    pollfd p{c_.fd, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) gone_ = true;
    return gone_;
  }
  bool stopping() const override { return stopping_.load(); }

  Completion finish() {
    Completion out{&c_, std::move(bytes_), false};
    if (!responded_ || gone_ || failed_ || (streamed_ && (!ended_ || http10_)))
      out.close_after = true;
    else
      out.close_after = !keep_alive_;
    if (!responded_ || failed_ || gone_) out.bytes.clear();
    return out;
  }

 private:
  bool put(std::string_view data) {
    if (failed_) return false;
    if (!write_all(c_.fd, data, now_s() + opts_.write_timeout_s)) failed_ = true;
    return !failed_;
  }
  const TransportOptions& opts_;
  const HttpHandlers& h_;
  const std::atomic<bool>& stopping_;
  Conn& c_;
  bool keep_alive_, http10_;
  bool responded_ = false, streamed_ = false, ended_ = false, failed_ = false, gone_ = false;
  std::string bytes_;
};

}  // namespace

void HttpTransport::Impl::worker_main() {
  for (;;) {
    std::pair<Conn*, HttpRequest> job;
    {
      std::unique_lock<std::mutex> lk(jobs_mu);
      jobs_cv.wait(lk, [&] { return jobs_closed || !jobs.empty(); });
      if (jobs.empty()) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    const HttpRequest& req = job.second;
    Exchange ex(opts, h, stopping, *job.first, req.keep_alive && !stopping.load(), req.minor_version == 0);
    try {
      h.handle(req, ex);
    } catch (const std::exception& e) {
      ex.respond(h.error(500, e.what()));
    } catch (...) {
      ex.respond(h.error(500, "internal error"));
    }
    Completion c = ex.finish();
    {
      std::lock_guard<std::mutex> lk(done_mu);
      done.push_back(std::move(c));
    }
    wake();
  }
}

// ------------------------------------------------------------------ loop side

void HttpTransport::Impl::enter_read(Conn& c, double now) {
  c.phase = Conn::Phase::kRead;
  c.stage = Conn::Stage::kIdle;
  c.deadline = now + opts.idle_timeout_s;
  c.head_checked = false;
  c.early.reset();
  c.parser.reset();
  charge(c, c.in.size());
}

void HttpTransport::Impl::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: stop watching the listener (it would fire
        // without end) until the next sweep.
        ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
        listener_paused = true;
      }
      return;
    }
    if ((int)conns.size() >= opts.max_connections) {
      // Make room by closing the kept-alive connection idle the longest, else refuse.
      Conn* victim = nullptr;
      for (auto& [k, c] : conns)
        if (c->phase == Conn::Phase::kRead && c->stage == Conn::Stage::kIdle && c->in.empty() &&
            (!victim || c->deadline < victim->deadline))
          victim = c.get();
      if (victim) {
        close_conn(*victim);
      } else {
        const std::string r = serialize_response(h.error(503, "too many connections"), false);
        if (h.on_response) h.on_response(503);
        [[maybe_unused]] ssize_t k = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>(opts.limits);
    c->fd = fd;
    c->phase = Conn::Phase::kRead;
    c->stage = Conn::Stage::kHead;  // a new connection's head deadline starts at accept
    c->deadline = now_s() + opts.header_timeout_s;
    watch(*c, EPOLLIN, EPOLL_CTL_ADD);
    conns.emplace(fd, std::move(c));
  }
}

void HttpTransport::Impl::on_readable(Conn& c) {
  char buf[kReadChunk];
  size_t total = 0;
  while (c.phase == Conn::Phase::kRead && total < kMaxReadPerWake) {
    const ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
    if (k == 0) return close_conn(c);  // the peer closed (a partial request dies with it)
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return close_conn(c);
    }
    total += (size_t)k;
    c.in.append(buf, (size_t)k);
    const int fd = c.fd;
    advance(c);
    if (!conns.count(fd)) return;  // closed
  }
}

// Feeds buffered bytes to the parser and acts on what it finds.
void HttpTransport::Impl::advance(Conn& c) {
  while (c.phase == Conn::Phase::kRead) {
    const bool was_started = c.parser.started();
    const size_t n = c.parser.feed(c.in.data(), c.in.size());
    c.in.erase(0, n);
    charge(c, c.parser.request().body.size() + c.in.size());
    if (buffered > opts.max_buffered_bytes && c.parser.state() == HttpParser::State::kBody)
      return respond(c, h.error(503, "the server holds too much request data; retry later"), true);
    if (!was_started && c.parser.started() && c.stage == Conn::Stage::kIdle) {
      c.stage = Conn::Stage::kHead;
      c.deadline = now_s() + opts.header_timeout_s;
    }
    if (c.parser.state() == HttpParser::State::kError) {
      return respond(c, h.error(c.parser.error_status(), c.parser.error_message()), true);
    }
    if (c.parser.head_done() && !c.head_checked) {
      c.head_checked = true;
      const HttpRequest& head = c.parser.request();
      if (auto r = h.on_head ? h.on_head(head) : std::nullopt) {
        // Answered at the head. A small declared body is read (and dropped)
        // to keep the connection; else (or when the client waits for a 100
        // Continue, which it does not get) the connection closes after the answer.
        if (head.chunked || head.content_length > kMaxSkippedBody || head.expect_continue)
          return respond(c, *r, true);
        if (c.parser.state() != HttpParser::State::kDone) c.early = std::move(*r);
        else return respond(c, *r, !head.keep_alive || stopping.load());
      }
      if (c.parser.state() == HttpParser::State::kBody) {
        c.stage = Conn::Stage::kBody;
        c.deadline = now_s() + opts.body_timeout_s;
        if (head.expect_continue) {
          static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] ssize_t k = ::send(c.fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL);
        }
      }
    }
    if (c.parser.state() == HttpParser::State::kDone) {
      if (!c.early) return dispatch(c);
      HttpResponse r = std::move(*c.early);
      c.early.reset();
      return respond(c, r, !c.parser.request().keep_alive || stopping.load());
    }
    if (c.in.empty()) return;
  }
}

void HttpTransport::Impl::respond(Conn& c, const HttpResponse& r, bool close_after) {
  if (h.on_response) h.on_response(r.status);
  start_write(c, serialize_response(r, !close_after), close_after);
}

void HttpTransport::Impl::start_write(Conn& c, std::string bytes, bool close_after) {
  c.phase = Conn::Phase::kWrite;
  c.out = std::move(bytes);
  c.out_off = 0;
  c.close_after = close_after;
  c.deadline = now_s() + opts.write_timeout_s;
  watch(c, EPOLLOUT, EPOLL_CTL_MOD);
  flush(c);
}

void HttpTransport::Impl::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t k = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (k > 0) {
      c.out_off += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT resumes
    return close_conn(c);
  }
  c.out.clear();
  c.out.shrink_to_fit();
  if (c.close_after || stopping.load()) return start_linger(c);
  enter_read(c, now_s());
  watch(c, EPOLLIN, EPOLL_CTL_MOD);
  advance(c);  // a pipelined request may already be buffered
}

void HttpTransport::Impl::start_linger(Conn& c) {
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Conn::Phase::kLinger;
  c.deadline = now_s() + kLingerSeconds;
  c.in.clear();
  c.in.shrink_to_fit();
  c.parser.reset();  // frees a refused body
  charge(c, 0);
  watch(c, EPOLLIN, EPOLL_CTL_MOD);
}

void HttpTransport::Impl::drain_linger(Conn& c) {
  char buf[kReadChunk];
  for (size_t total = 0; total < kMaxReadPerWake;) {
    const ssize_t k = ::recv(c.fd, buf, sizeof buf, 0);
    if (k > 0) {
      total += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return close_conn(c);  // EOF or error
  }
}

void HttpTransport::Impl::dispatch(Conn& c) {
  c.phase = Conn::Phase::kWork;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  ++n_working;
  HttpRequest req = std::move(c.parser.request());
  {
    std::lock_guard<std::mutex> lk(jobs_mu);
    jobs.emplace_back(&c, std::move(req));
  }
  jobs_cv.notify_one();
}

void HttpTransport::Impl::take_completions() {
  std::deque<Completion> got;
  {
    std::lock_guard<std::mutex> lk(done_mu);
    got.swap(done);
  }
  for (auto& d : got) {
    Conn& c = *d.conn;
    --n_working;
    charge(c, c.in.size());  // the request (and its body) is gone with the worker
    watch(c, EPOLLIN, EPOLL_CTL_ADD);
    if (d.bytes.empty()) {
      if (d.close_after) {
        close_conn(c);
        continue;
      }
      c.phase = Conn::Phase::kWrite;  // a finished stream: straight back to reading
      c.out.clear();
      c.out_off = 0;
      c.close_after = false;
      flush(c);
      continue;
    }
    start_write(c, std::move(d.bytes), d.close_after);
  }
}

void HttpTransport::Impl::sweep(double now) {
  if (listener_paused && listen_fd >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev);
    listener_paused = false;
  }
  std::vector<Conn*> expired;
  for (auto& [fd, c] : conns)
    if (c->phase != Conn::Phase::kWork && now >= c->deadline) expired.push_back(c.get());
  for (Conn* c : expired) {
    if (c->phase == Conn::Phase::kRead && c->stage != Conn::Stage::kIdle) {
      const bool head = c->stage == Conn::Stage::kHead;
      respond(*c,
              h.error(408, head ? "the request head did not arrive in time" : "the request body did not arrive in time"),
              true);
    } else {
      close_conn(*c);  // idle keep-alive, a stalled write, or the end of lingering
    }
  }
}

void HttpTransport::Impl::loop() {
  for (unsigned i = 0; i < (unsigned)std::max(1, opts.workers); ++i) workers.emplace_back([this] { worker_main(); });
  epoll_event evs[256];
  double next_sweep = 0;
  bool listening = true;
  double stop_deadline = 0;
  for (;;) {
    if (stopping.load() && listening) {
      listening = false;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
      ::close(listen_fd);
      listen_fd = -1;
      stop_deadline = now_s() + 30;
      std::vector<Conn*> idle;
      for (auto& [fd, c] : conns)
        if (c->phase != Conn::Phase::kWork) idle.push_back(c.get());
      for (Conn* c : idle) close_conn(*c);
    }
    if (!listening) {
      bool writing = false;
      for (auto& [fd, c] : conns) writing = writing || c->phase == Conn::Phase::kWrite;
      if ((n_working == 0 && !writing) || now_s() > stop_deadline) break;
    }
    const int n = ::epoll_wait(epoll_fd, evs, 256, kSweepMs);
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == listen_fd) {
        accept_all();
        continue;
      }
      if (fd == wake_fd) {
        uint64_t v;
        [[maybe_unused]] ssize_t k = ::read(wake_fd, &v, sizeof v);
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      const uint32_t e = evs[i].events;
      if (c.phase == Conn::Phase::kRead && (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        on_readable(c);
      } else if (c.phase == Conn::Phase::kWrite) {
        if (e & (EPOLLERR | EPOLLHUP)) close_conn(c);
        else if (e & EPOLLOUT) flush(c);
      } else if (c.phase == Conn::Phase::kLinger) {
        drain_linger(c);
      }
    }
    take_completions();
    if (!listening) {
      std::vector<Conn*> idle;  // during shutdown, answered connections close
      for (auto& [fd, c] : conns)
        if (c->phase == Conn::Phase::kRead || c->phase == Conn::Phase::kLinger) idle.push_back(c.get());
      for (Conn* c : idle) close_conn(*c);
    }
    const double now = now_s();
    if (now >= next_sweep) {
      sweep(now);
      next_sweep = now + kSweepMs / 1000.0;
    }
  }
  {
    std::lock_guard<std::mutex> lk(jobs_mu);
    jobs_closed = true;
  }
  jobs_cv.notify_all();
  for (auto& t : workers) t.join();
  workers.clear();
  take_completions();
  std::vector<int> fds;
  for (auto& [fd, c] : conns) fds.push_back(fd);
  for (int fd : fds) close_conn(*conns.at(fd));
}

// --------------------------------------------------------------------- public

HttpTransport::HttpTransport(TransportOptions opts, HttpHandlers handlers)
    : impl_(std::make_unique<Impl>(std::move(opts), std::move(handlers))) {}

HttpTransport::~HttpTransport() { stop(); }

Result<int> HttpTransport::bind() {
  Impl& m = *impl_;
  const TransportOptions& o = m.opts;
  if (o.port < 0 || o.port > 65535) return invalid_argument("port " + std::to_string(o.port) + " is out of range");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(o.port);
  if (::getaddrinfo(o.host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
    return io_error("cannot resolve the address '" + o.host + "'");
  std::string where = o.host + ":" + (o.port ? port : "(any port)");
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // not SO_REUSEPORT: no silent sharing
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return io_error("cannot listen on " + where + " (in use or not permitted)");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, (sockaddr*)&ss, &len);
  const int bound = ss.ss_family == AF_INET6 ? ntohs(((sockaddr_in6*)&ss)->sin6_port)
                                             : ntohs(((sockaddr_in*)&ss)->sin_port);
  m.listen_fd = fd;
  // Room for max_connections sockets (+ files, pipes): raise the soft descriptor limit up to the hard one.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t want = (rlim_t)o.max_connections + 256;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
      rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
  }
  m.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  m.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.epoll_fd < 0 || m.wake_fd < 0) return io_error("cannot create the event loop");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = m.listen_fd;
  ::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.listen_fd, &ev);
  ev.data.fd = m.wake_fd;
  ::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.wake_fd, &ev);
  return bound;
}

void HttpTransport::run() {
  if (impl_->listen_fd < 0 || impl_->stopping.load()) return;
  impl_->loop();
}

void HttpTransport::stop() {
  impl_->stopping.store(true);
  if (impl_->wake_fd >= 0) impl_->wake();
}

}  // namespace chimera::server
