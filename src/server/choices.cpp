// Several choices in one response; see choices.h.
#include "server/choices.h"

#include <nlohmann/json.hpp>

namespace chimera::server {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

Usage request_usage(const std::vector<Usage>& per_choice) {
  Usage u;
  if (per_choice.empty()) return u;
  u.prompt_tokens = per_choice[0].prompt_tokens;
  u.cached_tokens = per_choice[0].cached_tokens;
  for (const Usage& c : per_choice) u.completion_tokens += c.completion_tokens;
  return u;
}

std::string with_choice_index(const std::string& chunk, int index) {
  json j = json::parse(chunk, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return chunk;
  j["choices"][0]["index"] = index;
  return dump(j);
}

std::string join_choices(const std::vector<std::string>& bodies) {
  if (bodies.empty()) return "";
  json out = json::parse(bodies[0], nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return bodies[0];
  json choices = json::array();
  for (size_t i = 0; i < bodies.size(); ++i) {
    json b = json::parse(bodies[i], nullptr, /*allow_exceptions=*/false);
    if (b.is_discarded() || !b.contains("choices") || !b["choices"].is_array()) continue;
    for (auto& c : b["choices"]) {
      c["index"] = (int)i;
      choices.push_back(std::move(c));
    }
  }
  out["choices"] = std::move(choices);
  return dump(out);
}

}  // namespace chimera::server
