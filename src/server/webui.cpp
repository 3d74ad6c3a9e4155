// Embedded chat-page assets; see webui.h. The byte arrays are generated from
// src/server/webui/* by cmake/embed_file.cmake (src/CMakeLists.txt).
#include "server/webui.h"

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

namespace chimera::server {
namespace {

const char kIndexHtml[] = {
#include "webui/index.html.inc"
};
const char kChatJs[] = {
#include "webui/chat.js.inc"
};
const char kChatCss[] = {
#include "webui/chat.css.inc"
};

const WebAsset kAssets[] = {
    {"/", "text/html; charset=utf-8", {kIndexHtml, sizeof kIndexHtml}},
    {"/webui/chat.js", "text/javascript; charset=utf-8", {kChatJs, sizeof kChatJs}},
    {"/webui/chat.css", "text/css; charset=utf-8", {kChatCss, sizeof kChatCss}},
};

constexpr const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// A strong validator: FNV-1a 64 of the bytes (the assets change only with the binary).
std::string etag_of(std::string_view body) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : body) h = (h ^ c) * 1099511628211ull;
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", (unsigned long long)h);
  return buf;
}

}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  for (const auto& a : kAssets)
    if (a.path == path) return &a;
  return nullptr;
}

HttpResponse web_asset_response(const WebAsset& asset, std::string_view if_none_match) {
  static const std::string kEtags[] = {etag_of(kAssets[0].body), etag_of(kAssets[1].body), etag_of(kAssets[2].body)};
  static_assert(std::size(kAssets) == std::size(kEtags));
  const std::string& etag = kEtags[&asset - kAssets];
  HttpResponse r;
  r.headers = {{"Cache-Control", "no-cache"},
               {"ETag", etag},
               {"Content-Security-Policy", kCsp},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Referrer-Policy", "no-referrer"}};
  if (if_none_match == "*" || if_none_match.find(etag) != std::string_view::npos) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.content_type = std::string(asset.content_type);
  r.body = std::string(asset.body);
  return r;
}

}  // namespace chimera::server
