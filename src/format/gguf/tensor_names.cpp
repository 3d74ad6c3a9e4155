// GGUF tensor-name patterns (see tensor_names.h).
#include "format/gguf/tensor_names.h"

#include <cctype>

namespace chimera::format::tn {

std::string at(std::string_view pattern, int64_t layer) {
  std::string s(pattern);
  const size_t p = s.find("{i}");
  if (p != std::string::npos) s.replace(p, 3, std::to_string(layer));
  return s;
}

std::string layer_prefix(int64_t layer) { return at(kLayerPrefix, layer); }

std::string in(std::string_view prefix, std::string_view pattern) {
  constexpr std::string_view layer(kLayerPrefix);
  if (pattern.substr(0, layer.size()) == layer) pattern.remove_prefix(layer.size());
  std::string s(prefix);
  s += pattern;
  return s;
}

std::string linear(std::string_view prefix, std::string_view pattern) {
  constexpr std::string_view weight(".weight");
  std::string s = in(prefix, pattern);
  if (s.size() >= weight.size() && s.compare(s.size() - weight.size(), weight.size(), weight) == 0)
    s.resize(s.size() - weight.size());
  return s;
}

int64_t layer_of(std::string_view name) {
  constexpr std::string_view prefix(kLayerPrefix, sizeof(kLayerPrefix) - 1 - 3);  // "blk."
  if (name.substr(0, prefix.size()) != prefix) return -1;
  int64_t v = 0;
  size_t i = prefix.size();
  if (i >= name.size() || !std::isdigit((unsigned char)name[i])) return -1;
  for (; i < name.size() && std::isdigit((unsigned char)name[i]); ++i) {
    v = v * 10 + (name[i] - '0');
    if (v > (int64_t(1) << 31)) return -1;
  }
  return v;
}

}  // namespace chimera::format::tn
