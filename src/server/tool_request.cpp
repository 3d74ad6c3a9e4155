// Tool fields of chat requests; see tool_request.h.
#include "server/tool_request.h"

#include <cctype>
#include <set>

#include "runtime/grammar/json_schema.h"

namespace chimera::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

bool fail(ApiError* err, std::string msg, std::string param, std::string code = "invalid_value") {
  return bad_request(err, std::move(msg), std::move(param), std::move(code));
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum((unsigned char)c) || c == '_' || c == '-')) return false;
  return true;
}

bool given(const json& b, const char* k) { return b.contains(k) && !b[k].is_null(); }

bool parse_tools_array(const json& b, ToolRequest* out, ApiError* err) {
  const json& tools = b["tools"];
  if (!tools.is_array()) return fail(err, "'tools' must be an array of tool objects", "tools", "invalid_type");
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) return fail(err, p + " must be an object", p, "invalid_type");
    for (auto it = t.begin(); it != t.end(); ++it)
      if (it.key() != "type" && it.key() != "function")
        return fail(err, p + "." + it.key() + " is not supported", p + "." + it.key(), "unsupported_parameter");
    if (!t.contains("type") || t["type"] != "function")
      return fail(err, p + ".type must be \"function\"", p + ".type");
    if (!t.contains("function") || !t["function"].is_object())
      return fail(err, p + ".function must be an object", p + ".function", "invalid_type");
    const json& f = t["function"];
    for (auto it = f.begin(); it != f.end(); ++it) {
      const std::string& k = it.key();
      if (k != "name" && k != "description" && k != "parameters" && k != "strict")
        return fail(err, p + ".function." + k + " is not supported", p + ".function." + k, "unsupported_parameter");
    }
    if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>()))
      return fail(err, p + ".function.name must be 1-64 characters of a-z, A-Z, 0-9, _ and -", p + ".function.name");
    const std::string name = f["name"].get<std::string>();
    if (!names.insert(name).second)
      return fail(err, p + ".function.name: duplicate function name '" + name + "'", p + ".function.name");
    if (given(f, "description") && !f["description"].is_string())
      return fail(err, p + ".function.description must be a string", p + ".function.description", "invalid_type");
    if (given(f, "strict") && !f["strict"].is_boolean())
      return fail(err, p + ".function.strict must be a boolean", p + ".function.strict", "invalid_type");
    if (given(f, "parameters") && !f["parameters"].is_object())
      return fail(err, p + ".function.parameters must be a JSON Schema object", p + ".function.parameters",
                  "invalid_type");
    out->tools.push_back(ojson::parse(t.dump()));
  }
  return true;
}

bool parse_tool_choice(const json& b, ToolRequest* out, ApiError* err) {
  if (!given(b, "tool_choice")) return true;
  const json& c = b["tool_choice"];
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "auto") out->choice = ToolRequest::Choice::kAuto;
    else if (s == "none") out->choice = ToolRequest::Choice::kNone;
    else if (s == "required") out->choice = ToolRequest::Choice::kRequired;
    else
      return fail(err, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}",
                  "tool_choice");
  } else if (c.is_object()) {
    if (c.value("type", "") != "function" || !c.contains("function") || !c["function"].is_object() ||
        !c["function"].contains("name") || !c["function"]["name"].is_string())
      return fail(err, "'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                  "tool_choice");
    out->choice = ToolRequest::Choice::kNamed;
    out->named = c["function"]["name"].get<std::string>();
    bool found = false;
    for (const auto& t : out->tools) found = found || t["function"]["name"] == out->named;
    if (!found)
      return fail(err, "'tool_choice' names function '" + out->named + "', which is not in 'tools'",
                  "tool_choice.function.name");
  } else {
    return fail(err, "'tool_choice' must be a string or an object", "tool_choice", "invalid_type");
  }
  if (out->tools.empty() && (out->choice == ToolRequest::Choice::kRequired))
    return fail(err, "'tool_choice' \"required\" needs a non-empty 'tools'", "tool_choice");
  return true;
}

// Assistant tool_calls and tool messages in the history.
bool validate_history(const json& b, ApiError* err) {
  if (!b.contains("messages") || !b["messages"].is_array()) return true;  // reported by parse_messages
  const json& msgs = b["messages"];
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    if (!m.is_object()) continue;
    const std::string p = "messages[" + std::to_string(i) + "]";
    const std::string role = m.value("role", "");
    if (given(m, "tool_calls")) {
      if (role != "assistant") return fail(err, p + ".tool_calls is only allowed on assistant messages", p + ".tool_calls");
      const json& tc = m["tool_calls"];
      if (!tc.is_array()) return fail(err, p + ".tool_calls must be an array", p + ".tool_calls", "invalid_type");
      for (size_t j = 0; j < tc.size(); ++j) {
        const std::string q = p + ".tool_calls[" + std::to_string(j) + "]";
        const json& c = tc[j];
        if (!c.is_object() || (given(c, "type") && c["type"] != "function") || !c.contains("function") ||
            !c["function"].is_object())
          return fail(err, q + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", q);
        if (given(c, "id") && !c["id"].is_string()) return fail(err, q + ".id must be a string", q + ".id", "invalid_type");
        const json& f = c["function"];
        if (!f.contains("name") || !f["name"].is_string())
          return fail(err, q + ".function.name must be a string", q + ".function.name", "invalid_type");
        if (given(f, "arguments") && !f["arguments"].is_string())
          return fail(err, q + ".function.arguments must be a string (JSON text)", q + ".function.arguments",
                      "invalid_type");
      }
    }
    if (role == "tool" && (!m.contains("tool_call_id") || !m["tool_call_id"].is_string()))
      return fail(err, p + ".tool_call_id must be a string on tool messages", p + ".tool_call_id", "invalid_type");
  }
  return true;
}

// $ref pointers of a function's parameters, moved under #/$defs/<def>.
void rebase_refs(ojson& j, const std::string& def) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (k == "$ref" && v.is_string()) {
        const std::string r = v.get<std::string>();
        if (r == "#")
          v = "#/$defs/" + def;
        else if (r.rfind("#/", 0) == 0)
          v = "#/$defs/" + def + r.substr(1);
      } else {
        rebase_refs(v, def);
      }
    }
  } else if (j.is_array()) {
    for (auto& v : j) rebase_refs(v, def);
  }
}

std::string gbnf_literal(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The generic format's description, for templates without tool support.
std::string generic_tool_prompt(const ojson& tools) {
  std::string s =
      "You can call functions. To call one, reply with only a JSON object "
      "{\"name\": <function name>, \"arguments\": <arguments object>}. Functions:";
  for (const auto& t : tools) s += "\n" + t["function"].dump();
  return s;
}

std::string content_text(const ojson& m) {
  if (!m.contains("content") || m["content"].is_null()) return "";
  if (m["content"].is_string()) return m["content"].get<std::string>();
  std::string s;
  for (const auto& part : m["content"])
    if (part.is_object() && part.contains("text") && part["text"].is_string()) s += part["text"].get<std::string>();
  return s;
}

}  // namespace

bool parse_tool_request(const json& body, bool chat, ToolRequest* out, ApiError* err) {
  *out = ToolRequest();
  if (!chat) {
    for (const char* k : {"tools", "tool_choice", "parallel_tool_calls"})
      if (given(body, k))
        return fail(err, std::string("'") + k + "' is only supported on /v1/chat/completions", k,
                    "unsupported_parameter");
    return true;
  }
  if (given(body, "tools") && !parse_tools_array(body, out, err)) return false;
  if (!parse_tool_choice(body, out, err)) return false;
  if (given(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean())
      return fail(err, "'parallel_tool_calls' must be a boolean", "parallel_tool_calls", "invalid_type");
    out->parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (!validate_history(body, err)) return false;
  if (out->active() && given(body, "logprobs") && body["logprobs"] == true)
    return fail(err, "'logprobs' cannot be combined with 'tools' (unless tool_choice is \"none\")", "logprobs",
                "unsupported_parameter");
  const bool constrained = given(body, "grammar") || (given(body, "response_format") && body["response_format"].is_object() &&
                                                      body["response_format"].value("type", "text") != "text");
  if (out->forced() && constrained)
    return fail(err, "a forced 'tool_choice' cannot be combined with 'response_format' or 'grammar'", "tool_choice",
                "unsupported_parameter");
  return true;
}

ToolFormat tool_format_for(const tokenizer::ChatTemplate& t) {
  if (t.is_fallback() || t.source().find("tools") == std::string::npos) return ToolFormat::kGeneric;
  const std::string& f = t.family();
  if (f == "phi4") return ToolFormat::kPhi4;
  if (f == "llama3") return ToolFormat::kLlama3;
  if (t.source().find("<tool_call>") != std::string::npos) return ToolFormat::kTagged;  // granite, chatml (Qwen, Hermes)
  return ToolFormat::kGeneric;
}

int prepare_tool_render(const ojson& messages, const ToolRequest& tr, ToolFormat f, ojson* out_messages,
                        tokenizer::ChatRenderOptions* ro) {
  int inserted = 0;
  ojson msgs = ojson::array();
  for (const auto& m : messages) {
    ojson c = m;
    if (m.value("role", "") == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      if (f == ToolFormat::kGeneric) {
        // Written out in the generic format the model is asked to use.
        std::string text = content_text(m);
        for (const auto& call : m["tool_calls"]) {
          ojson args = ojson::parse(call["function"].value("arguments", std::string("{}")), nullptr, false);
          if (args.is_discarded()) args = call["function"].value("arguments", std::string());
          if (!text.empty()) text += '\n';
          text += ojson({{"name", call["function"]["name"]}, {"arguments", args}}).dump();
        }
        c.erase("tool_calls");
        c["content"] = text;
      } else {
        // HF templates read arguments as a mapping (`arguments | tojson`).
        for (auto& call : c["tool_calls"]) {
          auto& fn = call["function"];
          if (fn.contains("arguments") && fn["arguments"].is_string()) {
            ojson a = ojson::parse(fn["arguments"].get<std::string>(), nullptr, false);
            if (!a.is_discarded()) fn["arguments"] = a;
          }
          if (!call.contains("type")) call["type"] = "function";
        }
        if (!c.contains("content") || c["content"].is_null()) c["content"] = "";
      }
    }
    msgs.push_back(std::move(c));
  }
  if (tr.active()) {
    if (f == ToolFormat::kGeneric) {
      const std::string intro = generic_tool_prompt(tr.tools);
      if (!msgs.empty() && msgs[0].value("role", "") == "system") {
        msgs[0]["content"] = intro + "\n\n" + content_text(msgs[0]);
      } else {
        msgs.insert(msgs.begin(), ojson({{"role", "system"}, {"content", intro}}));
        inserted = 1;
      }
    } else {
      ro->extra_context["tools"] = tr.tools;
    }
  }
  *out_messages = std::move(msgs);
  return inserted;
}

bool apply_tool_generation(const ToolSession& ts, GenerationParams* gp, ApiError* err) {
  if (!ts.req.active()) return true;
  gp->render_special = true;
  if (!ts.req.forced()) return true;
  runtime::grammar::GrammarSource g;
  if (!forced_call_grammar(ts.req, ts.format, &g, err)) return false;
  gp->grammar = std::move(g);
  return true;
}

bool forced_call_grammar(const ToolRequest& tr, ToolFormat f, runtime::grammar::GrammarSource* out, ApiError* err) {
  const char* args_key = f == ToolFormat::kLlama3 ? "parameters" : "arguments";
  ojson schema = {{"$defs", ojson::object()}};  // ordered: "name" before the arguments
  ojson any = ojson::array();
  for (size_t i = 0; i < tr.tools.size(); ++i) {
    const auto& fn = tr.tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (tr.choice == ToolRequest::Choice::kNamed && name != tr.named) continue;
    const std::string def = "chimera_fn_" + std::to_string(i);
    ojson params = fn.contains("parameters") && !fn["parameters"].is_null()
                       ? fn["parameters"]
                       : ojson{{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
    // Each function's own schema, compiled alone, for an error that names it.
    if (auto g = runtime::grammar::json_schema_to_gbnf(params.dump()); !g) {
      const std::string p = "tools[" + std::to_string(i) + "].function.parameters";
      return fail(err, p + ": " + g.status().message(), p);
    }
    rebase_refs(params, def);
    schema["$defs"][def] = params;
    any.push_back({{"type", "object"},
                   {"properties", {{"name", {{"const", name}}}, {args_key, {{"$ref", "#/$defs/" + def}}}}},
                   {"required", {"name", args_key}},
                   {"additionalProperties", false}});
  }
  if (any.size() == 1)
    for (auto& [k, v] : any[0].items()) schema[k] = v;
  else
    schema["anyOf"] = any;
  auto g = runtime::grammar::json_schema_to_gbnf(schema.dump());
  if (!g) return fail(err, "cannot build the tool-call grammar: " + g.status().message(), "tools");
  std::string gbnf = *g;
  CHIMERA_CHECK(gbnf.rfind("root ::= ", 0) == 0);
  gbnf.replace(0, 4, "chimera-tool-call");
  std::string root;
  switch (f) {
    case ToolFormat::kTagged:
      root = "root ::= " + gbnf_literal("<tool_call>") + " \"\\n\"? chimera-tool-call \"\\n\"? " +
             gbnf_literal("</tool_call>");
      break;
    case ToolFormat::kPhi4:
      root = "root ::= " + gbnf_literal("<|tool_call|>[") + " chimera-tool-call " + gbnf_literal("]<|/tool_call|>");
      break;
    case ToolFormat::kLlama3:
    case ToolFormat::kGeneric: root = "root ::= chimera-tool-call"; break;
  }
  out->kind = runtime::grammar::GrammarSource::Kind::kGbnf;
  out->text = root + "\n" + gbnf;
  return true;
}

}  // namespace chimera::server
