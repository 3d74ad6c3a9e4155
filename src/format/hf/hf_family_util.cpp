// Typed config.json reads shared by the family tables (hf_family_util.h).
#include "format/hf/hf_family_util.h"

#include <cmath>

namespace chimera::format::hf {

using nlohmann::json;

Result<int64_t> get_int(const json& c, const char* key, int64_t def) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  if (!it->is_number_integer()) return invalid_argument(std::string("'") + key + "' must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v <= 0 || v > (int64_t(1) << 31)) return invalid_argument(std::string("'") + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}

Result<int64_t> require_int(const json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return not_found(std::string("missing config key '") + key + "'");
  return get_int(c, key, 0);
}

Result<double> get_float(const json& c, const char* key, double def) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  if (!it->is_number()) return invalid_argument(std::string("'") + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v > 0) || !std::isfinite(v)) return invalid_argument(std::string("'") + key + "' must be positive");
  return v;
}

const char* pick(const json& c, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (auto it = c.find(k); it != c.end() && !it->is_null()) return k;
  return *keys.begin();
}

Status refuse_bool(const json& c, const char* key, bool supported, const char* family) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return invalid_argument(std::string("'") + key + "' must be true or false");
  if (it->get<bool>() != supported)
    return unsupported(std::string("'") + key + "': " + (supported ? "false" : "true") + " is not supported for " + family);
  return Status::ok();
}

Result<int64_t> padded_vocab(const json& c, int64_t def_multiple) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t m, get_int(c, "pad_vocab_size_multiple", def_multiple));
  return (n_vocab + m - 1) / m * m;
}

void set_u32s(GgufWriter& w, const std::string& arch, std::initializer_list<std::pair<const char*, int64_t>> kv) {
  for (const auto& [k, v] : kv) w.set(arch + "." + k, GgufValue::from_u32((uint32_t)v));
}

}  // namespace chimera::format::hf
