// libFuzzer target for the HTTP request path of `chimera serve`: raw bytes ->
// HttpParser (fed whole, then again in pieces whose sizes come from the
// input) -> for a POST body, the OpenAI request validation of
// src/server/openai_json (chat or completions by path, else the generic JSON
// object parser of /tokenize) -> for a valid chat request, rendering of its
// messages with fixed Llama-3 and ChatML templates.
// Invariants under test: no crash, sanitizer report, hang or absurd
// allocation; the parser reaches the same result however the bytes are split
// (trap otherwise); every refusal carries a status in 4xx/5xx and a message;
// a parsed body never exceeds the body limit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/http_parser.h"
#include "server/openai_json.h"
#include "tokenizer/chat_template.h"

using namespace chimera;
using namespace chimera::server;

namespace {

constexpr HttpLimits kLimits{4096, 32, 1u << 16};

const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const std::vector<tokenizer::ChatTemplate>& templates() {
  static const std::vector<tokenizer::ChatTemplate> t = [] {
    std::vector<tokenizer::ChatTemplate> v;
    for (const char* src : {kLlama3, kChatML}) {
      auto p = tokenizer::ChatTemplate::parse(src);
      if (!p) __builtin_trap();
      v.push_back(std::move(p).value());
    }
    v.push_back(tokenizer::ChatTemplate::fallback());
    return v;
  }();
  return t;
}

struct Outcome {
  HttpParser::State state;
  size_t used;
  int status;
};

Outcome parse_whole(const char* p, size_t n, HttpParser& hp) {
  const size_t used = hp.feed(p, n);
  return {hp.state(), used, hp.error_status()};
}

Outcome parse_split(const char* p, size_t n, HttpParser& hp, uint8_t seed) {
  size_t used = 0, step = (size_t)(seed % 7) + 1;
  while (used < n && (hp.state() == HttpParser::State::kHead || hp.state() == HttpParser::State::kBody)) {
    const size_t k = std::min(step, n - used);
    used += hp.feed(p + used, k);
    step = step * 3 % 11 + 1;
  }
  return {hp.state(), used, hp.error_status()};
}

void check_request(const HttpRequest& req) {
  if (req.method != "POST") return;
  const std::string& body = req.body;
  RequestLimits lim;
  lim.n_ctx = 256;
  lim.n_vocab = 512;
  ParsedRequest pr;
  ApiError err;
  if (req.path == "/v1/chat/completions" || req.path == "/v1/completions") {
    const bool chat = req.path == "/v1/chat/completions";
    if (!parse_generation_request(body, chat, lim, &pr, &err)) {
      if (err.status < 400 || err.status > 599 || err.message.empty()) __builtin_trap();
      (void)error_body(err);
      return;
    }
    if (!chat) return;
    tokenizer::ChatRenderOptions ro;
    ro.add_generation_prompt = true;
    ro.bos_token = "<s>";
    ro.eos_token = "</s>";
    ro.now = 0;
    for (const auto& t : templates()) {
      auto r = t.render_json(pr.messages, ro);
      if (!r && r.status().message().empty()) __builtin_trap();
    }
  } else {
    nlohmann::json j;
    if (!parse_json_object(body, &j, &err) && (err.status < 400 || err.message.empty())) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* p = (const char*)data + 1;
  const size_t n = size - 1;
  HttpParser whole(kLimits), split(kLimits);
  const Outcome a = parse_whole(p, n, whole);
  const Outcome b = parse_split(p, n, split, data[0]);
  if (a.state != b.state || a.used != b.used || a.status != b.status) __builtin_trap();
  if (a.state == HttpParser::State::kError) {
    if (a.status < 400 || a.status > 599 || whole.error_message().empty()) __builtin_trap();
    return 0;
  }
  if (a.state != HttpParser::State::kDone) return 0;
  const HttpRequest& req = whole.request();
  if (req.body != split.request().body || req.path != split.request().path) __builtin_trap();
  if (req.body.size() > kLimits.max_body_bytes) __builtin_trap();
  check_request(req);
  // A second, pipelined request after the first.
  whole.reset();
  if (a.used < n) {
    whole.feed(p + a.used, n - a.used);
    if (whole.state() == HttpParser::State::kDone) check_request(whole.request());
  }
  return 0;
}
