// `chimera serve` against hostile HTTP clients (issue 16, transport items),
// over raw sockets: a 150 MiB chunked upload is refused while it is read
// (413 / closed, bounded peak RSS) and an unauthenticated one at its head
// (401); 100 slowloris sockets neither hold the (4) workers nor keep /health
// or a completion from being answered, and each is closed by the absolute
// head deadline (408) although it keeps sending bytes; malformed, negative and
// absurd Content-Lengths get 400/413 at once; pipelined requests are all
// answered, in order; a non-streamed request whose client disconnects is
// cancelled and its slot freed. The server is alive after every case.
// Timing never decides a verdict: every wait is bounded and the assertions
// are on events (status lines, closes, metrics).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "server_fixture.h"

namespace chimera::test {
namespace {

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, (sockaddr*)&a, sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t k = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (k <= 0) return false;
    off += (size_t)k;
  }
  return true;
}

// Reads until `done(buffer)` or the peer closes or `seconds` pass. Returns what arrived.
std::string read_until(int fd, double seconds, const std::function<bool(const std::string&)>& done) {
  std::string buf;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds((int)(seconds * 1000));
  while (!done(buf)) {
    const int left = (int)std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) break;
    char b[65536];
    const ssize_t k = ::recv(fd, b, sizeof b, 0);
    if (k <= 0) break;
    buf.append(b, (size_t)k);
  }
  return buf;
}

// True when the peer closes (EOF or reset) within `seconds`, data before it ignored.
bool closed_by_peer(int fd, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds((int)(seconds * 1000));
  for (;;) {
    const int left = (int)std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return false;
    char b[4096];
    if (::recv(fd, b, sizeof b, 0) <= 0) return true;
  }
}

struct RawResponse {
  int status = -1;
  std::string body;
};

// Splits complete responses (Content-Length framed) off the front of buf.
std::vector<RawResponse> parse_responses(const std::string& buf) {
  std::vector<RawResponse> out;
  size_t pos = 0;
  for (;;) {
    const size_t he = buf.find("\r\n\r\n", pos);
    if (he == std::string::npos || buf.compare(pos, 9, "HTTP/1.1 ") != 0) break;
    const std::string head = buf.substr(pos, he - pos);
    const size_t cl = head.find("Content-Length: ");
    if (cl == std::string::npos) break;
    const size_t n = std::strtoull(head.c_str() + cl + 16, nullptr, 10);
    if (buf.size() < he + 4 + n) break;
    out.push_back({std::atoi(head.c_str() + 9), buf.substr(he + 4, n)});
    pos = he + 4 + n;
  }
  return out;
}

// One request on a fresh connection; the first response (status -1: none, closed).
RawResponse raw_request(int port, const std::string& bytes, double seconds = 10) {
  const int fd = connect_to(port);
  if (fd < 0) return {};
  send_all(fd, bytes);
  const std::string got = read_until(fd, seconds, [](const std::string& b) { return !parse_responses(b).empty(); });
  ::close(fd);
  auto r = parse_responses(got);
  return r.empty() ? RawResponse{} : r[0];
}

// Peak resident set (VmHWM) of a process, KiB.
long peak_rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

TEST(HostileTransport, ChunkedUploadIsRefusedWhileReadAndKeyCheckedFirst) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--api-key", "sekrit");
  const long rss0 = peak_rss_kib(srv.pid());
  ASSERT_GT(rss0, 0);
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n";
  const std::string mib(1u << 20, 'a');
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", mib.size());
  const std::string chunk = size_line + mib + "\r\n";

  // Without the key: 401 at the head, before any body byte is read.
  {
    const int fd = connect_to(srv.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, head + "\r\n"));
    const std::string got = read_until(fd, 10, [](const std::string& b) { return !parse_responses(b).empty(); });
    ::close(fd);
    auto r = parse_responses(got);
    ASSERT_EQ(r.size(), 1u) << got;
    EXPECT_EQ(r[0].status, 401) << r[0].body;
  }
  // With the key: 150 MiB of chunks; refused (413 or a closed connection)
  // once 16 MiB have been decoded, never buffered whole.
  {
    const int fd = connect_to(srv.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, head + "Authorization: Bearer sekrit\r\n\r\n"));
    int sent_mib = 0;
    for (; sent_mib < 150; ++sent_mib)
      if (!send_all(fd, chunk)) break;
    const std::string got = read_until(fd, 10, [](const std::string& b) { return !parse_responses(b).empty(); });
    ::close(fd);
    auto r = parse_responses(got);
    if (!r.empty()) {  // else: closed (reset) before the answer was read
      EXPECT_EQ(r[0].status, 413) << r[0].body;
    }
    const long grew_mib = (peak_rss_kib(srv.pid()) - rss0) / 1024;
    EXPECT_LT(grew_mib, 64) << "peak RSS grew by " << grew_mib << " MiB for a " << sent_mib << " MiB upload";
  }
  EXPECT_TRUE(srv.alive());
  EXPECT_TRUE(srv.answers_health());
}

TEST(HostileTransport, SlowlorisHoldsNoWorkerAndMeetsTheAbsoluteHeadDeadline) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--http-threads", "4", "--header-timeout", "3");
  constexpr int kSockets = 100;
  std::vector<int> fds;
  for (int i = 0; i < kSockets; ++i) {
    const int fd = connect_to(srv.port());
    ASSERT_GE(fd, 0) << "socket " << i;
    ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\n"));
    fds.push_back(fd);
  }
  // The attack: one more header byte per socket every 50 ms, until the server closes it.
  std::atomic<bool> stop{false};
  std::vector<std::string> got(kSockets);
  std::vector<bool> closed(kSockets, false);
  std::thread attacker([&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int open = kSockets;
    while (open > 0 && !stop.load() && std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < kSockets; ++i) {
        if (closed[i]) continue;
        char b[4096];
        ssize_t k;
        while ((k = ::recv(fds[i], b, sizeof b, MSG_DONTWAIT)) > 0) got[i].append(b, (size_t)k);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
            ::send(fds[i], "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
          closed[i] = true;
          --open;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // Under attack: /health answers within 2 s, a real completion succeeds.
  for (int i = 0; i < 3; ++i) {
    httplib::Client c("127.0.0.1", srv.port());
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(2, 0);
    auto h = c.Get("/health");
    ASSERT_TRUE(h) << "no /health answer within 2 s during the slowloris (try " << i << ")";
    EXPECT_EQ(h->status, 200);
  }
  {
    auto c = srv.client(30);
    auto r = post_json(*c, "/v1/completions", R"({"prompt": "Once", "max_tokens": 4, "temperature": 0})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  attacker.join();
  // Every slowloris socket was closed by the server (the deadline did not
  // move with the trickled bytes), with a 408.
  int n_closed = 0, n_408 = 0;
  for (int i = 0; i < kSockets; ++i) {
    n_closed += closed[i] ? 1 : 0;
    n_408 += got[i].rfind("HTTP/1.1 408", 0) == 0 ? 1 : 0;
    ::close(fds[i]);
  }
  EXPECT_EQ(n_closed, kSockets);
  EXPECT_EQ(n_408, kSockets);
  EXPECT_TRUE(srv.alive());
  EXPECT_TRUE(srv.answers_health());
}

TEST(HostileTransport, BufferedRequestDataIsBoundedAcrossConnections) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--max-body-mb", "4", "--max-buffered-mb", "8");
  // Three uploads of 3.9 MiB of a declared 4 MiB (each within the body
  // limit, never complete): together they pass the 8 MiB budget, so one is
  // refused with 503 once the server has read them.
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n";
  const std::string part(4000u << 10, ' ');
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    fds.push_back(connect_to(srv.port()));
    ASSERT_GE(fds.back(), 0);
  }
  std::vector<std::string> got(3);
  std::vector<size_t> off(3, 0);
  std::string all = head + part;
  int refused = -1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (refused < 0 && std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 3 && refused < 0; ++i) {
      if (off[i] < all.size()) {
        const ssize_t k = ::send(fds[i], all.data() + off[i], all.size() - off[i], MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) off[i] += (size_t)k;
      }
      char b[4096];
      ssize_t k;
      while ((k = ::recv(fds[i], b, sizeof b, MSG_DONTWAIT)) > 0) got[i].append(b, (size_t)k);
      if (!parse_responses(got[i]).empty()) refused = i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int fd : fds) ::close(fd);
  ASSERT_GE(refused, 0) << "no upload was refused; sent " << off[0] << ", " << off[1] << ", " << off[2];
  EXPECT_EQ(parse_responses(got[refused])[0].status, 503) << got[refused];
  EXPECT_TRUE(srv.alive());
  EXPECT_TRUE(srv.answers_health());
}

TEST(HostileTransport, TrickledBodyMeetsTheAbsoluteBodyDeadline) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--body-timeout", "1");
  const int fd = connect_to(srv.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"));
  // One body byte every 50 ms (each well inside any per-read timeout) until the server answers or closes.
  std::string got;
  int sent = 0;
  for (; sent < 400; ++sent) {  // <= 20 s
    char b[4096];
    ssize_t k;
    while ((k = ::recv(fd, b, sizeof b, MSG_DONTWAIT)) > 0) got.append(b, (size_t)k);
    if (k == 0 || !got.empty() || ::send(fd, " ", 1, MSG_NOSIGNAL) != 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  got += read_until(fd, 5, [&](const std::string& more) { return !parse_responses(got + more).empty(); });
  ::close(fd);
  auto r = parse_responses(got);
  ASSERT_EQ(r.size(), 1u) << "after " << sent << " bytes: " << got;
  EXPECT_EQ(r[0].status, 408) << r[0].body;
  EXPECT_LT(sent, 400);
  EXPECT_TRUE(srv.alive());
  EXPECT_TRUE(srv.answers_health());
}

TEST(HostileTransport, ConnectionCapEvictsIdleKeepAliveThenRefuses) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--max-connections", "8");
  auto has_response = [](const std::string& b) { return !parse_responses(b).empty(); };
  // A kept-alive connection that has been answered and now waits: idle.
  const int idle = connect_to(srv.port());
  ASSERT_GE(idle, 0);
  ASSERT_TRUE(send_all(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(parse_responses(read_until(idle, 10, has_response)).size(), 1u);
  // Seven silent connections fill the cap (they are mid-request, not idle).
  std::vector<int> silent;
  for (int i = 0; i < 7; ++i) {
    silent.push_back(connect_to(srv.port()));
    ASSERT_GE(silent.back(), 0);
  }
  // The next connection is served: the idle one is closed to make room.
  RawResponse r = raw_request(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(closed_by_peer(idle, 10)) << "the idle connection was not closed";
  ::close(idle);
  // With no idle connection left, a new one beyond the cap gets 503.
  silent.push_back(connect_to(srv.port()));
  RawResponse refused = raw_request(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(refused.status, 503) << refused.body;
  for (int fd : silent) ::close(fd);
  // Closed connections free their places.
  bool healthy = false;
  for (int i = 0; i < 100 && !healthy; ++i) {  // <= 5 s: the server sees the closes on its next wake
    healthy = raw_request(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n").status == 200;
    if (!healthy) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(healthy);
  EXPECT_TRUE(srv.alive());
}

TEST(HostileTransport, BadContentLengthIsAnsweredAtOnce) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  struct Case {
    std::string headers;
    int status;
  };
  const std::vector<Case> cases = {
      {"Content-Length: -5\r\n", 400},
      {"Content-Length: abc\r\n", 400},
      {"Content-Length: 1e3\r\n", 400},
      {"Content-Length: \r\n", 400},
      {"Content-Length: +12\r\n", 400},
      {"Content-Length: 12, 12\r\n", 400},
      {"Content-Length: 5\r\nContent-Length: 6\r\n", 400},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Transfer-Encoding: gzip\r\n", 501},
      {"Content-Length: 17000000\r\n", 413},
      {"Content-Length: 99999999999999999999999999\r\n", 413},
      {"Content-Length: 18446744073709551616\r\n", 413},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.headers);
    // The head only: no body follows, so an answer can only come from the head.
    RawResponse r = raw_request(srv.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + k.headers + "\r\n");
    EXPECT_EQ(r.status, k.status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(!j.is_discarded() && j.contains("error")) << r.body;
  }
  for (const char* bad : {"GARBAGE\r\n\r\n", "GET /health HTTP/9.9\r\n\r\n", "GET health HTTP/1.1\r\n\r\n",
                          "GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n", "GET /health HTTP/1.1\r\n folded\r\n\r\n"}) {
    SCOPED_TRACE(bad);
    RawResponse r = raw_request(srv.port(), bad);
    EXPECT_GE(r.status, 400);
    EXPECT_LT(r.status, 506);
  }
  // A head over the limit (32 KiB) and a request line over it.
  RawResponse big = raw_request(srv.port(), "GET /health HTTP/1.1\r\nX-Big: " + std::string(40000, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.status, 431);
  RawResponse uri = raw_request(srv.port(), "GET /" + std::string(40000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(uri.status, 414);
  EXPECT_TRUE(srv.alive());
  EXPECT_TRUE(srv.answers_health());
}

TEST(HostileTransport, PipelinedRequestsAreAllAnsweredInOrder) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared);
  const std::string gen = R"({"prompt": "Once", "max_tokens": 3, "temperature": 0})";
  const std::string tok = R"({"content": "Once upon"})";
  const std::string det = R"({"tokens": [1, 281]})";
  auto post = [](const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  // Everything in one write; the chunked one too.
  const std::string all = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post("/v1/completions", gen) +
                          post("/tokenize", tok) + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" +
                          "POST /detokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
                          "5\r\n" + det.substr(0, 5) + "\r\n" + [&] {
                            char b[16];
                            std::snprintf(b, sizeof b, "%zx\r\n", det.size() - 5);
                            return std::string(b);
                          }() + det.substr(5) + "\r\n0\r\n\r\n" +
                          post("/v1/nope", "{}") + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const int fd = connect_to(srv.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, all));
  const std::string got =
      read_until(fd, 30, [](const std::string& b) { return parse_responses(b).size() >= 7; });
  ::close(fd);
  auto r = parse_responses(got);
  ASSERT_EQ(r.size(), 7u) << got;
  EXPECT_EQ(r[0].status, 200);
  EXPECT_EQ(r[0].body, R"({"status":"ok"})");
  EXPECT_EQ(r[1].status, 200);
  EXPECT_EQ(json::parse(r[1].body)["object"], "text_completion") << r[1].body;
  EXPECT_EQ(r[2].status, 200);
  EXPECT_TRUE(json::parse(r[2].body).contains("tokens")) << r[2].body;
  EXPECT_EQ(r[3].status, 200);
  EXPECT_EQ(json::parse(r[3].body)["object"], "list") << r[3].body;
  EXPECT_EQ(r[4].status, 200);
  EXPECT_TRUE(json::parse(r[4].body).contains("content")) << r[4].body;
  EXPECT_EQ(r[5].status, 404);
  EXPECT_EQ(r[6].status, 200);
  EXPECT_TRUE(srv.alive());
}

TEST(HostileTransport, AbandonedNonStreamingRequestIsCancelled) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "-c", "16384", "--parallel", "1");
  const std::string body =
      R"({"prompt": "Once upon a time", "max_tokens": 16000, "temperature": 0, "ignore_eos": true})";
  const int fd = connect_to(srv.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body));
  // Wait (bounded) until it runs, then hang up.
  double running = -1;
  for (int i = 0; i < 200 && running != 1; ++i) {  // <= 10 s
    running = metric(get_metrics(srv), "chimera_requests_running");
    if (running != 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(running, 1);
  ::close(fd);
  double cancelled = -1;
  for (int i = 0; i < 200; ++i) {  // <= 10 s
    const std::string m = get_metrics(srv);
    running = metric(m, "chimera_requests_running");
    cancelled = metric(m, "chimera_requests_total{finish_reason=\"cancelled\"}");
    if (running == 0 && cancelled >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(cancelled, 1);
  EXPECT_EQ(running, 0);
  // The only slot serves the next request.
  auto c = srv.client(30);
  auto ok = post_json(*c, "/v1/completions", R"({"prompt": "Once", "max_tokens": 4, "temperature": 0})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(srv.alive());
}

}  // namespace
}  // namespace chimera::test

namespace chimera::test {
namespace {

TEST(HostileTransport, LimitFlagsRefuseBadValues) {
  // Refused before the model is read (the path does not exist).
  for (const char* bad : {"--max-body-mb 0", "--max-body-mb 99999", "--max-header-bytes 10", "--max-connections 0", "--max-buffered-mb 0",
                          "--header-timeout 0", "--body-timeout -1", "--idle-timeout x"}) {
    SCOPED_TRACE(bad);
    ShellResult r = run_chimera(std::string("serve -m /nonexistent.gguf ") + bad);
    EXPECT_EQ(r.rc, 1) << r.output;
    const std::string flag = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(r.output.find("error: " + flag), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace chimera::test
