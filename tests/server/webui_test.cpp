// The chat page's assets over HTTP (src/server/webui.h): served without the
// API key, byte for byte the files in src/server/webui/, with Content-Type,
// cache validators (ETag, 304) and a strict Content-Security-Policy; nothing
// in them points anywhere else; --no-webui turns them off (404). The page in
// a real browser: tests/browser/chat_page_test.cpp.
#include <gtest/gtest.h>

#include "server/server_fixture.h"

namespace chimera::test {
namespace {

struct Asset {
  const char* path;
  const char* file;
  const char* content_type;
};
constexpr Asset kAssets[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/webui/chat.js", "chat.js", "text/javascript; charset=utf-8"},
    {"/webui/chat.css", "chat.css", "text/css; charset=utf-8"},
};

std::string source_file(const std::string& name) {
  const auto bytes = read_file_bytes(std::string(CHIMERA_SOURCE_DIR) + "/src/server/webui/" + name);
  return std::string(bytes.begin(), bytes.end());
}

TEST(WebUi, ServesThePageWithoutTheKeyWithItsHeaders) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--api-key", "sekrit");
  auto c = srv.client(10);
  for (const Asset& a : kAssets) {
    SCOPED_TRACE(a.path);
    auto r = c->Get(a.path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), a.content_type);
    const std::string body = source_file(a.file);
    ASSERT_FALSE(body.empty());
    EXPECT_EQ(r->body, body);  // embedded byte for byte
    EXPECT_EQ(r->body.find("://"), std::string::npos) << "an asset refers to another origin";
    EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    const std::string csp = r->get_header_value("Content-Security-Policy");
    for (const char* d : {"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                          "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"})
      EXPECT_NE(csp.find(d), std::string::npos) << d << " missing in: " << csp;
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
    // A cached copy is revalidated: its ETag gets 304 without a body, another one the asset.
    const std::string etag = r->get_header_value("ETag");
    ASSERT_FALSE(etag.empty());
    // (Connection: close: httplib 0.11 reads a 304 without Content-Length until the connection closes.)
    auto same = c->Get(a.path, {{"If-None-Match", etag}, {"Connection", "close"}});
    ASSERT_TRUE(same);
    EXPECT_EQ(same->status, 304);
    EXPECT_EQ(same->body, "");
    EXPECT_EQ(same->get_header_value("ETag"), etag);
    auto other = c->Get(a.path, {{"If-None-Match", "\"0\""}});
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 200);
    EXPECT_EQ(other->body, body);
  }
  // A query string does not matter; the key still guards the API; other paths stay unknown.
  auto q = c->Get("/?chat=1");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, 200);
  auto models = c->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  for (const char* p : {"/webui/", "/webui/chat.jsx", "/index.html", "/webui/../"}) {
    auto r = c->Get(p);
    ASSERT_TRUE(r) << p;
    EXPECT_EQ(r->status, 404) << p;
  }
  auto post = post_json(*c, "/", "{}", "sekrit");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_NE(srv.log().find("chat page at http://127.0.0.1:"), std::string::npos) << srv.log();
}

TEST(WebUi, NoWebuiFlagTurnsThePageOff) {
  CHIMERA_REQUIRE_SHARED(shared);
  START_SERVER(srv, shared, "--no-webui");
  auto c = srv.client(10);
  for (const Asset& a : kAssets) {
    auto r = c->Get(a.path);
    ASSERT_TRUE(r) << a.path;
    EXPECT_EQ(r->status, 404) << a.path;
  }
  auto h = c->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(srv.log().find("chat page"), std::string::npos) << srv.log();
}

}  // namespace
}  // namespace chimera::test
