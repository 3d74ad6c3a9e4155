// Parsers for the tool-call syntaxes; see tool_call_parser.h.
#include "server/tool_call_parser.h"

#include <random>

namespace chimera::server {
namespace {

using json = nlohmann::json;

constexpr const char* kTagOpen = "<tool_call>";
constexpr const char* kTagClose = "</tool_call>";
constexpr const char* kPhiOpen = "<|tool_call|>";
constexpr const char* kPhiClose = "<|/tool_call|>";
constexpr const char* kPhiAltOpen = "functools";
constexpr const char* kPythonTag = "<|python_tag|>";

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && is_blank(s[a])) ++a;
  while (b > a && is_blank(s[b - 1])) --b;
  return s.substr(a, b - a);
}

size_t skip_blank(const std::string& s, size_t p) {
  while (p < s.size() && is_blank(s[p])) ++p;
  return p;
}

// End (one past) of the JSON object or array starting at s[p], or npos when
// it is not closed. Strings (with escapes) are skipped whole.
size_t json_end(const std::string& s, size_t p) {
  if (p >= s.size() || (s[p] != '{' && s[p] != '[')) return std::string::npos;
  int depth = 0;
  bool in_str = false;
  for (size_t i = p; i < s.size(); ++i) {
    const char c = s[i];
    if (in_str) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string::npos;
}

std::string new_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlnum[rng() % (sizeof kAlnum - 1)];
  return id;
}

// One call object: {"name", "arguments"|"parameters"} or {"type":"function","function":{...}}.
bool to_call(const json& j, ToolCall* out) {
  if (!j.is_object()) return false;
  const json* o = &j;
  if (j.contains("function") && j["function"].is_object()) o = &j["function"];
  auto name = o->find("name");
  if (name == o->end() || !name->is_string() || name->get<std::string>().empty()) return false;
  const json* args = nullptr;
  for (const char* k : {"arguments", "parameters"})
    if (o->contains(k)) args = &(*o)[k];
  json a = json::object();
  if (args) {
    a = *args;
    if (a.is_string()) a = json::parse(a.get<std::string>(), nullptr, false);  // already encoded
    if (!a.is_object()) return false;
  }
  out->id = new_call_id();
  out->name = name->get<std::string>();
  out->arguments = a.dump(-1, ' ', false, json::error_handler_t::replace);
  return true;
}

// A JSON value at s[p..]: one call object or a list of them.
bool parse_calls_at(const std::string& s, size_t p, size_t* end, std::vector<ToolCall>* calls) {
  const size_t e = json_end(s, p);
  if (e == std::string::npos) return false;
  json j = json::parse(s.substr(p, e - p), nullptr, false);
  if (j.is_discarded()) return false;
  if (j.is_array()) {
    if (j.empty()) return false;
    for (const auto& item : j) {
      ToolCall c;
      if (!to_call(item, &c)) return false;
      calls->push_back(std::move(c));
    }
  } else {
    ToolCall c;
    if (!to_call(j, &c)) return false;
    calls->push_back(std::move(c));
  }
  *end = e;
  return true;
}

ToolParse parse_tagged(const std::string& text, const char* open, const char* close) {
  ToolParse r;
  std::string content;
  size_t pos = 0;
  const size_t lo = std::string(open).size(), lc = std::string(close).size();
  for (;;) {
    const size_t t = text.find(open, pos);
    if (t == std::string::npos) {
      content += text.substr(pos);
      break;
    }
    content += text.substr(pos, t - pos);
    const size_t j = skip_blank(text, t + lo);
    size_t end = 0;
    if (!parse_calls_at(text, j, &end, &r.calls)) return {text, {}};
    end = skip_blank(text, end);
    if (text.compare(end, lc, close) == 0)
      end += lc;
    else if (end != text.size())  // only the last block may lack its closing tag (cut by a stop)
      return {text, {}};
    pos = end;
  }
  if (r.calls.empty()) return {text, {}};
  r.content = trim(content);
  return r;
}

// kLlama3 / kGeneric: calls from the start of the reply, separated by ';' or blanks.
ToolParse parse_leading_json(const std::string& text, bool python_tag) {
  ToolParse r;
  size_t p = skip_blank(text, 0);
  if (python_tag && text.compare(p, std::string(kPythonTag).size(), kPythonTag) == 0)
    p = skip_blank(text, p + std::string(kPythonTag).size());
  if (p >= text.size() || (text[p] != '{' && text[p] != '[')) return {text, {}};
  while (p < text.size() && (text[p] == '{' || text[p] == '[')) {
    size_t end = 0;
    if (!parse_calls_at(text, p, &end, &r.calls)) return {text, {}};
    p = skip_blank(text, end);
    if (p < text.size() && text[p] == ';') p = skip_blank(text, p + 1);
  }
  r.content = trim(text.substr(p));
  return r;
}

// Longest suffix of s that is a proper prefix of tag.
size_t partial_tag_suffix(const std::string& s, const std::string& tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k)
    if (s.compare(s.size() - k, k, tag, 0, k) == 0) return k;
  return 0;
}

}  // namespace

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::kTagged: return "tagged";
    case ToolFormat::kPhi4: return "phi4";
    case ToolFormat::kLlama3: return "llama3";
    case ToolFormat::kGeneric: return "generic";
  }
  return "?";
}

ToolParse parse_tool_calls(const std::string& text, ToolFormat f) {
  switch (f) {
    case ToolFormat::kTagged: return parse_tagged(text, kTagOpen, kTagClose);
    case ToolFormat::kPhi4: {
      ToolParse r = parse_tagged(text, kPhiOpen, kPhiClose);
      if (r.calls.empty() && text.find(kPhiAltOpen) != std::string::npos) {
        // functools[...]: no closing tag.
        const size_t t = text.find(kPhiAltOpen);
        size_t end = 0;
        std::vector<ToolCall> calls;
        const size_t j = skip_blank(text, t + std::string(kPhiAltOpen).size());
        if (parse_calls_at(text, j, &end, &calls))
          return {trim(text.substr(0, t) + text.substr(end)), std::move(calls)};
      }
      return r;
    }
    case ToolFormat::kLlama3: return parse_leading_json(text, /*python_tag=*/true);
    case ToolFormat::kGeneric: return parse_leading_json(text, /*python_tag=*/false);
  }
  return {text, {}};
}

std::string ToolStreamFilter::feed(const std::string& piece) {
  if (holding_) {
    pending_ += piece;
    return "";
  }
  pending_ += piece;
  if (format_ == ToolFormat::kLlama3 || format_ == ToolFormat::kGeneric) {
    if (started_) {
      std::string out;
      out.swap(pending_);
      return out;
    }
    const size_t p = skip_blank(pending_, 0);
    if (p == pending_.size()) return "";  // only blanks so far
    const std::string rest = pending_.substr(p);
    const std::string tag = kPythonTag;
    const bool llama = format_ == ToolFormat::kLlama3;
    if (llama && rest.size() < tag.size() && tag.compare(0, rest.size(), rest) == 0) return "";  // maybe the tag
    const bool may_be_call = rest[0] == '{' || rest[0] == '[' || (llama && rest.compare(0, tag.size(), tag) == 0);
    started_ = true;
    if (may_be_call) {
      holding_ = true;
      return "";
    }
    std::string out;
    out.swap(pending_);
    return out;
  }
  // Tagged formats: pass text until an opening tag (or what may become one).
  std::vector<std::string> opens = {kTagOpen};
  if (format_ == ToolFormat::kPhi4) opens = {kPhiOpen, kPhiAltOpen};
  size_t first = std::string::npos;
  for (const auto& o : opens) first = std::min(first, pending_.find(o));
  if (first != std::string::npos) {
    std::string out = pending_.substr(0, first);
    pending_.erase(0, first);
    holding_ = true;
    return out;
  }
  size_t keep = 0;
  for (const auto& o : opens) keep = std::max(keep, partial_tag_suffix(pending_, o));
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

ToolParse ToolStreamFilter::finish() {
  std::string rest;
  rest.swap(pending_);
  if (!holding_) return {rest, {}};
  ToolParse r = parse_tool_calls(rest, format_);
  if (r.calls.empty()) r.content = rest;  // malformed: the held text as it was
  return r;
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls) {
  json a = json::array();
  for (size_t i = 0; i < calls.size(); ++i)
    a.push_back({{"index", i},
                 {"id", calls[i].id},
                 {"type", "function"},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  return a;
}

}  // namespace chimera::server
