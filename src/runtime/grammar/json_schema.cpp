// JSON Schema -> GBNF (see json_schema.h for what is supported). Each schema
// node becomes a rule; $ref targets become one named rule each (registered
// before their body is built, so recursive schemas work). Errors carry the
// JSON pointer of the schema node.
#include <cmath>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar/json_schema.h"

namespace chimera::runtime::grammar {

namespace {

using Json = nlohmann::ordered_json;

// Shared primitives (emitted only when used).
const char* const kSpace = R"(space ::= | " " | "\n" [ \t]{0,20})";
const char* const kChar =
    R"(json-char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))";
const char* const kString = R"(json-string ::= "\"" json-char* "\"" space)";
const char* const kNumber =
    R"(json-number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? space)";
const char* const kInteger = R"(json-integer ::= "-"? ("0" | [1-9] [0-9]{0,15}) space)";
const char* const kBoolean = R"(json-boolean ::= ("true" | "false") space)";
const char* const kNull = R"(json-null ::= "null" space)";
const char* const kValue =
    R"(json-value ::= json-object | json-array | json-string | json-number | ("true" | "false" | "null") space)";
const char* const kObject =
    R"(json-object ::= "{" space (json-string ":" space json-value ("," space json-string ":" space json-value)*)? "}" space)";
const char* const kArray = R"(json-array ::= "[" space (json-value ("," space json-value)*)? "]" space)";

// A GBNF string literal for these bytes (valid UTF-8).
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += (char)c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += (char)c;
    }
  }
  return out + "\"";
}

struct SchemaError {
  std::string msg;
};

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  std::string run() {
    const std::string body = visit(root_, "#");
    std::string out = "root ::= " + body + "\n";
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    for (const char* p : prims_) out += std::string(p) + "\n";
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& msg) {
    throw SchemaError{"JSON schema: " + msg + " (at " + path + ")"};
  }

  void use(const char* prim) {
    prims_.insert(prim);
    prims_.insert(kSpace);
    if (prim == kString || prim == kValue || prim == kObject) prims_.insert(kChar);
    if (prim == kValue || prim == kObject || prim == kArray) {
      for (const char* p : {kValue, kObject, kArray, kString, kChar, kNumber}) prims_.insert(p);
    }
  }

  std::string new_rule(const std::string& body) {
    std::string name = "r";
    name += std::to_string(rules_.size());
    rules_.push_back({name, body});
    return name;
  }

  static const std::set<std::string>& known_keywords() {
    static const std::set<std::string> k = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems",
        "maxItems", "anyOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "title", "description", "default", "examples", "$schema", "$id",
        "$comment", "deprecated", "readOnly", "writeOnly"};
    return k;
  }

  int64_t count(const Json& s, const char* key, const std::string& path) {
    const Json& v = s[key];
    if (!v.is_number_integer() && !v.is_number_unsigned()) fail(path, std::string("'") + key + "' must be a non-negative integer");
    const int64_t n = v.get<int64_t>();
    if (n < 0) fail(path, std::string("'") + key + "' must be a non-negative integer");
    return n;
  }

  static std::string repeat_expr(const std::string& item, int64_t min, int64_t max) {  // max < 0: unbounded
    if (max < 0) return min == 0 ? item + "*" : item + "{" + std::to_string(min) + ",}";
    if (min == max) return item + "{" + std::to_string(min) + "}";
    return item + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  // Returns a GBNF expression (a rule name or a parenthesised expression).
  std::string visit(const Json& s, const std::string& path) {
    struct Depth {  // the compiler recurses per schema level
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } guard(depth_);
    if (depth_ > kMaxDepth) fail(path, "the schema nests too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "schema 'false' matches nothing");
      use(kValue);
      return "json-value";
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (!known_keywords().count(k)) fail(path, "unsupported keyword '" + k + "'");
    }
    if (s.contains("$ref")) {
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && k != "title" && k != "description" && k != "$defs" && k != "definitions" &&
            k != "$comment" && k != "default" && k != "examples")
          fail(path, "'$ref' combined with '" + k + "' is not supported");
      return ref(s["$ref"], path);
    }
    if (s.contains("anyOf")) {
      const Json& alts = s["anyOf"];
      if (!alts.is_array() || alts.empty()) fail(path, "'anyOf' must be a non-empty array");
      for (const char* k : {"type", "enum", "const", "properties", "items"})
        if (s.contains(k)) fail(path, std::string("'anyOf' combined with '") + k + "' is not supported");
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i)
        body += (i ? " | " : "") + visit(alts[i], path + "/anyOf/" + std::to_string(i));
      return new_rule(body);
    }
    if (s.contains("const")) return new_rule(literal(s["const"].dump()) + " space");
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail(path, "'enum' must be a non-empty array");
      use(kSpace);
      std::string body = "(";
      for (size_t i = 0; i < e.size(); ++i) body += (i ? " | " : "") + literal(e[i].dump());
      return new_rule(body + ") space");
    }
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
        return object(s, path);
      if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return array(s, path);
      use(kValue);
      return "json-value";
    }
    const Json& t = s["type"];
    if (t.is_string()) return typed(s, t.get<std::string>(), path);
    if (!t.is_array() || t.empty()) fail(path, "'type' must be a string or a non-empty array of strings");
    std::string body;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string()) fail(path, "'type' must be a string or a non-empty array of strings");
      body += (i ? " | " : "") + typed(s, t[i].get<std::string>(), path);
    }
    return new_rule(body);
  }

  std::string typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "string") return string(s, path);
    if (type == "integer") return integer(s, path);
    if (type == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) fail(path, std::string("'") + k + "' is supported for type 'integer' only, not 'number'");
      use(kNumber);
      return "json-number";
    }
    if (type == "boolean") return use(kBoolean), "json-boolean";
    if (type == "null") return use(kNull), "json-null";
    if (type == "object") return object(s, path);
    if (type == "array") return array(s, path);
    fail(path, "unknown type '" + type + "'");
  }

  std::string string(const Json& s, const std::string& path) {
    const int64_t min = s.contains("minLength") ? count(s, "minLength", path) : 0;
    const int64_t max = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
    if (max >= 0 && min > max) fail(path, "'minLength' is greater than 'maxLength'");
    if (min == 0 && max < 0) return use(kString), "json-string";
    use(kString);
    return new_rule("\"\\\"\" " + repeat_expr("json-char", min, max) + " \"\\\"\" space");
  }

  static bool bound(const Json& s, const char* key, bool upper, bool exclusive, int64_t* out) {
    if (!s.contains(key)) return false;
    const Json& v = s[key];
    if (!v.is_number()) throw SchemaError{std::string("JSON schema: '") + key + "' must be a number"};
    const double d = v.get<double>();
    if (!(std::fabs(d) < 1e18)) throw SchemaError{std::string("JSON schema: '") + key + "' is out of the supported range (|x| < 1e18)"};
    if (v.is_number_integer()) {
      int64_t x = v.get<int64_t>();
      if (exclusive) x += upper ? -1 : 1;
      *out = x;
    } else {
      double x = upper ? std::floor(d) : std::ceil(d);
      if (exclusive && x == d) x += upper ? -1 : 1;
      *out = (int64_t)x;
    }
    return true;
  }

  std::string integer(const Json& s, const std::string& path) {
    int64_t lo = 0, hi = 0, x = 0;
    bool has_lo = false, has_hi = false;
    try {
      for (auto [key, exclusive] : {std::pair{"minimum", false}, std::pair{"exclusiveMinimum", true}}) {
        if (bound(s, key, false, exclusive, &x)) lo = has_lo ? std::max(lo, x) : x, has_lo = true;
      }
      for (auto [key, exclusive] : {std::pair{"maximum", false}, std::pair{"exclusiveMaximum", true}}) {
        if (bound(s, key, true, exclusive, &x)) hi = has_hi ? std::min(hi, x) : x, has_hi = true;
      }
    } catch (const SchemaError& e) {
      fail(path, e.msg.substr(13));
    }
    if (!has_lo && !has_hi) return use(kInteger), "json-integer";
    if (has_lo && has_hi && lo > hi) fail(path, "the integer range is empty (minimum above maximum)");
    use(kSpace);
    return new_rule(integer_range_gbnf(has_lo, lo, has_hi, hi) + " space");
  }

  std::string object(const Json& s, const std::string& path) {
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) fail(path, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "'required' must be an array of strings");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) fail(path, "'required' must be an array of strings");
        if (!props.contains(r.get<std::string>()))
          fail(path, "required property '" + r.get<std::string>() + "' is not in 'properties'");
        required.insert(r.get<std::string>());
      }
    }
    const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (extra && !extra->is_boolean() && !extra->is_object())
      fail(path, "'additionalProperties' must be a boolean or a schema");
    use(kSpace);
    if (props.empty()) {
      if (extra && extra->is_boolean() && !extra->get<bool>()) return new_rule(R"("{" space "}" space)");
      if (!extra || extra->is_boolean()) return use(kObject), "json-object";
      use(kString);
      const std::string v = visit(*extra, path + "/additionalProperties");
      const std::string kv = new_rule("json-string \":\" space " + v);
      return new_rule("\"{\" space (" + kv + " (\",\" space " + kv + ")*)? \"}\" space");
    }
    std::vector<std::string> req_kv, opt_kv;
    for (const auto& [name, sub] : props.items()) {
      const std::string v = visit(sub, path + "/properties/" + name);
      const std::string kv = new_rule(literal(Json(name).dump()) + " space \":\" space " + v);
      (required.count(name) ? req_kv : opt_kv).push_back(kv);
    }
    std::string body = "\"{\" space ";
    if (!req_kv.empty()) {
      for (size_t i = 0; i < req_kv.size(); ++i) body += (i ? "\",\" space " : "") + req_kv[i] + " ";
      for (const auto& kv : opt_kv) body += "(\",\" space " + kv + ")? ";
    } else {
      // Any subset of the optional properties, in order: first present one, then the rest each optional.
      std::vector<std::string> tail(opt_kv.size() + 1);  // tail[k]: optional ", kv_j" for j >= k
      for (size_t k = opt_kv.size(); k-- > 0;) {
        tail[k] = new_rule("(\",\" space " + opt_kv[k] + ")?" + (tail[k + 1].empty() ? "" : " " + tail[k + 1]));
      }
      std::string alts;
      for (size_t i = 0; i < opt_kv.size(); ++i)
        alts += (i ? " | " : "") + opt_kv[i] + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
      body += "(" + alts + ")? ";
    }
    return new_rule(body + "\"}\" space");
  }

  std::string array(const Json& s, const std::string& path) {
    std::string item;
    if (s.contains("items")) {
      if (s["items"].is_array()) fail(path, "'items' as an array (tuple form) is not supported; use one schema");
      item = visit(s["items"], path + "/items");
    } else {
      use(kValue);
      item = "json-value";
    }
    const int64_t min = s.contains("minItems") ? count(s, "minItems", path) : 0;
    const int64_t max = s.contains("maxItems") ? count(s, "maxItems", path) : -1;
    if (max >= 0 && min > max) fail(path, "'minItems' is greater than 'maxItems'");
    use(kSpace);
    if (max == 0) return new_rule(R"("[" space "]" space)");
    const std::string more = "(\",\" space " + item + ")";
    const std::string rest = repeat_expr(more, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
    const std::string items = item + " " + rest;
    return new_rule("\"[\" space " + (min > 0 ? items : "(" + items + ")?") + " \"]\" space");
  }

  std::string ref(const Json& r, const std::string& path) {
    if (!r.is_string()) fail(path, "'$ref' must be a string");
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') fail(path, "only local '$ref' (\"#/...\") is supported, not '" + target + "'");
    const Json* node = &root_;
    try {
      if (target.size() > 1) node = &root_.at(Json::json_pointer(target.substr(1)));
    } catch (const std::exception&) {
      fail(path, "'$ref' target '" + target + "' does not exist");
    }
    const std::string name = "ref" + std::to_string(refs_.size());
    refs_.emplace(target, name);
    const size_t slot = rules_.size();
    rules_.push_back({name, ""});
    const std::string body = visit(*node, target);
    rules_[slot].second = body;
    return name;
  }

  static constexpr int kMaxDepth = 128;
  const Json& root_;
  int depth_ = 0;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<const char*> prims_;
  std::unordered_map<std::string, std::string> refs_;
};

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema_json) {
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("JSON schema is not valid JSON: ") + e.what());
  }
  try {
    return Compiler(schema).run();
  } catch (const SchemaError& e) {
    return invalid_argument(e.msg);
  } catch (const std::exception& e) {
    return invalid_argument(std::string("JSON schema: ") + e.what());
  }
}

std::string json_object_gbnf() {
  std::string out = "root ::= json-object\n";
  for (const char* p : {kObject, kValue, kArray, kString, kChar, kNumber, kSpace}) out += std::string(p) + "\n";
  return out;
}

}  // namespace chimera::runtime::grammar
