// Tool calls in chat responses; see tool_response.h.
#include "server/tool_response.h"

namespace chimera::server {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

void keep_allowed(std::vector<ToolCall>* calls, const ToolSession& ts) {
  if (!ts.req.parallel && calls->size() > 1) calls->resize(1);
}

}  // namespace

std::string with_tool_calls(const std::string& body, const std::string& text, const ToolSession& ts) {
  if (!ts.req.active()) return body;
  ToolParse p = parse_tool_calls(text, ts.format);
  if (p.calls.empty()) return body;
  keep_allowed(&p.calls, ts);
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) return body;
  json& c = j["choices"][0];
  json calls = tool_calls_json(p.calls);
  for (auto& x : calls) x.erase("index");  // message.tool_calls carry no index
  c["message"]["content"] = blank(p.content) ? json() : json(p.content);
  c["message"]["tool_calls"] = calls;
  c["finish_reason"] = "tool_calls";
  return dump(j);
}

std::vector<std::string> tool_stream_tail(const ResponseMeta& m, ToolStreamFilter& filter, const ToolSession& ts,
                                          FinishReason finish) {
  std::vector<std::string> out;
  ToolParse p = filter.finish();
  keep_allowed(&p.calls, ts);
  if (!p.content.empty() && (p.calls.empty() || !blank(p.content)))
    out.push_back(chunk_body(m, p.content, FinishReason::kNone));
  for (const auto& call : tool_calls_json(p.calls)) {
    json head = call;
    head["function"]["arguments"] = "";
    json args = {{"index", call["index"]}, {"function", {{"arguments", call["function"]["arguments"]}}}};
    for (const json& d : {head, args}) {
      json j = json::parse(chunk_body(m, "", FinishReason::kNone));
      j["choices"][0]["delta"] = {{"tool_calls", json::array({d})}};
      out.push_back(dump(j));
    }
  }
  json fin = json::parse(chunk_body(m, "", finish));
  if (!p.calls.empty()) fin["choices"][0]["finish_reason"] = "tool_calls";
  out.push_back(dump(fin));
  return out;
}

}  // namespace chimera::server
