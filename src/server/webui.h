// The browser chat page of `chimera serve` (docs/SERVER.md, "Web UI"): three
// static assets — GET / (index.html), /webui/chat.js, /webui/chat.css — from
// src/server/webui/, embedded in the binary at build time (no CDN, nothing
// fetched from elsewhere). They hold no secret and no model data, so they are
// served without the API key; the page sends the key (typed by the user, kept
// in the browser's localStorage) with its API calls, which need it as usual.
//
// Every asset is sent with its Content-Type, `Cache-Control: no-cache` and an
// ETag (a matching If-None-Match gets 304), and a strict Content-Security-
// Policy: scripts and styles only from this server's own files (no inline
// script, no eval), connections only to this origin, no frames, forms, plugins
// or base-URI changes.
#pragma once

#include <string_view>

#include "server/http_transport.h"

namespace chimera::server {

struct WebAsset {
  std::string_view path;          // "/", "/webui/chat.js", ...
  std::string_view content_type;
  std::string_view body;
};

// The asset served at `path`; nullptr when there is none.
const WebAsset* find_web_asset(std::string_view path);

// 200 with the asset (or 304 when `if_none_match` names its ETag), with the
// cache and security headers above.
HttpResponse web_asset_response(const WebAsset& asset, std::string_view if_none_match);

}  // namespace chimera::server
