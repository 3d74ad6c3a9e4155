// The transport's HTTP/1.1 request parser (src/server/http_parser.h) and
// helpers, without sockets: heads, Content-Length and chunked bodies fed
// whole and byte by byte, pipelined leftovers, every limit and refusal
// status, keep-alive rules, response serialisation.
#include <gtest/gtest.h>

#include "server/http_parser.h"
#include "server/http_transport.h"

namespace chimera::server {
namespace {

struct Fed {
  HttpParser::State state;
  size_t used;
  int status;
  HttpRequest req;
};

Fed feed(const std::string& in, HttpLimits lim = {}, bool bytewise = false) {
  HttpParser p(lim);
  size_t used = 0;
  if (bytewise) {
    while (used < in.size() && (p.state() == HttpParser::State::kHead || p.state() == HttpParser::State::kBody))
      used += p.feed(in.data() + used, 1);
  } else {
    used = p.feed(in.data(), in.size());
  }
  return {p.state(), used, p.error_status(), p.request()};
}

TEST(HttpParser, ContentLengthBodyWholeAndBytewise) {
  const std::string req =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nX-Empty:\r\n\r\nhelloGET /next";
  for (bool bytewise : {false, true}) {
    SCOPED_TRACE(bytewise);
    Fed f = feed(req, {}, bytewise);
    ASSERT_EQ(f.state, HttpParser::State::kDone);
    EXPECT_EQ(f.used, req.find("GET /next"));  // the pipelined rest is left
    EXPECT_EQ(f.req.method, "POST");
    EXPECT_EQ(f.req.path, "/v1/completions");
    EXPECT_EQ(f.req.target, "/v1/completions?x=1");
    EXPECT_EQ(f.req.body, "hello");
    EXPECT_EQ(f.req.header("host"), "a");
    EXPECT_EQ(f.req.header("x-empty"), "");
    EXPECT_TRUE(f.req.keep_alive);
  }
}

TEST(HttpParser, ChunkedBodyWithExtensionsAndTrailer) {
  const std::string req =
      "POST /tokenize HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;name=val\r\nhello\r\n000A \r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
  for (bool bytewise : {false, true}) {
    SCOPED_TRACE(bytewise);
    Fed f = feed(req, {}, bytewise);
    ASSERT_EQ(f.state, HttpParser::State::kDone) << f.status;
    EXPECT_TRUE(f.req.chunked);
    EXPECT_EQ(f.req.body, "hello, world!!!");
    EXPECT_EQ(req.substr(f.used), "NEXT");
  }
}

TEST(HttpParser, BodyLimitHoldsWhileReading) {
  HttpLimits lim;
  lim.max_body_bytes = 10;
  // Declared too large: refused at the head, no body byte read.
  Fed cl = feed("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", lim);
  EXPECT_EQ(cl.state, HttpParser::State::kError);
  EXPECT_EQ(cl.status, 413);
  // Chunked: refused by the chunk that passes the limit, before its data.
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  Fed ch = feed(head + "6\r\nabcdef\r\n5\r\n", lim);
  EXPECT_EQ(ch.state, HttpParser::State::kError);
  EXPECT_EQ(ch.status, 413);
  EXPECT_EQ(ch.used, head.size() + 14);
  Fed absurd = feed(head + "ffffffffffffffffffff\r\n", lim);
  EXPECT_EQ(absurd.status, 413);
  Fed exact = feed(head + "a\r\n0123456789\r\n0\r\n\r\n", lim);
  EXPECT_EQ(exact.state, HttpParser::State::kDone);
  EXPECT_EQ(exact.req.body, "0123456789");
}

TEST(HttpParser, RefusalsCarryTheirStatus) {
  HttpLimits lim;
  lim.max_head_bytes = 256;
  lim.max_headers = 4;
  const std::string post = "POST / HTTP/1.1\r\n";
  struct Case {
    std::string in;
    int status;
  };
  const std::vector<Case> cases = {
      {post + "Content-Length: -1\r\n\r\n", 400},
      {post + "Content-Length: 0x10\r\n\r\n", 400},
      {post + "Content-Length: 1 2\r\n\r\n", 400},
      {post + "Content-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {post + "Content-Length: 99999999999999999999999999999\r\n\r\n", 413},
      {post + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {post + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
      {post + "Expect: something\r\n\r\n", 417},
      {post + "Transfer-Encoding: chunked\r\n\r\n1;" + std::string(2000, 'e') + "\r\nx\r\n0\r\n\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\n\r\n1\r\nx" + std::string(2000, ' ') + "\r\n0\r\n\r\n", 400},
      {post + " folded\r\n\r\n", 400},
      {post + "Bad Name: x\r\n\r\n", 400},
      {post + ": x\r\n\r\n", 400},
      {post + "X: a\x01b\r\n\r\n", 400},
      {post + "X: a\rb\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1 \r\n\r\n", 400},
      {"GET http://a/ HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.x\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", 431},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.in.substr(0, 80));
    Fed f = feed(k.in, lim);
    EXPECT_EQ(f.state, HttpParser::State::kError);
    EXPECT_EQ(f.status, k.status);
    Fed b = feed(k.in, lim, /*bytewise=*/true);
    EXPECT_EQ(b.status, k.status);
    EXPECT_EQ(b.used, f.used);  // the same verdict at the same byte, however the input is split
  }
}

TEST(HttpParser, KeepAliveRulesAndLeadingEmptyLines) {
  EXPECT_TRUE(feed("\r\n\r\nGET / HTTP/1.1\r\n\r\n").req.keep_alive);
  EXPECT_EQ(feed("\r\n\r\nGET / HTTP/1.1\r\n\r\n").state, HttpParser::State::kDone);
  EXPECT_FALSE(feed("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").req.keep_alive);
  EXPECT_FALSE(feed("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n").req.keep_alive);
  EXPECT_FALSE(feed("GET / HTTP/1.0\r\n\r\n").req.keep_alive);
  EXPECT_TRUE(feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").req.keep_alive);
  EXPECT_TRUE(feed("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n").req.expect_continue);
  // Bare LF line ends are accepted.
  Fed lf = feed("GET /health HTTP/1.1\nHost: x\n\n");
  EXPECT_EQ(lf.state, HttpParser::State::kDone);
  EXPECT_EQ(lf.req.header("Host"), "x");
}

TEST(HttpParser, ResetParsesTheNextPipelinedRequest) {
  const std::string two = "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
  HttpParser p;
  const size_t n = p.feed(two.data(), two.size());
  ASSERT_EQ(p.state(), HttpParser::State::kDone);
  EXPECT_EQ(p.request().path, "/a");
  p.reset();
  EXPECT_FALSE(p.started());
  EXPECT_EQ(p.feed(two.data() + n, two.size() - n), two.size() - n);
  ASSERT_EQ(p.state(), HttpParser::State::kDone);
  EXPECT_EQ(p.request().path, "/b");
  EXPECT_EQ(p.request().body, "hi");
}

TEST(HttpTransportHelpers, SerializeResponse) {
  HttpResponse r;
  r.status = 413;
  r.body = "{}";
  r.headers = {{"X-A", "1"}};
  EXPECT_EQ(serialize_response(r, false),
            "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-A: 1\r\n"
            "Connection: close\r\n\r\n{}");
}

}  // namespace
}  // namespace chimera::server
