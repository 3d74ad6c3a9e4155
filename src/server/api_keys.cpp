// API-key matching; see api_keys.h.
#include "server/api_keys.h"

namespace chimera::server {
namespace {

// Equal strings, comparing every byte of `known` whatever `given` holds.
bool constant_time_equal(std::string_view given, std::string_view known) {
  unsigned char diff = given.size() == known.size() ? 0 : 1;
  for (size_t i = 0; i < known.size(); ++i) {
    const unsigned char g = i < given.size() ? (unsigned char)given[i] : 0;
    diff |= (unsigned char)(g ^ (unsigned char)known[i]);
  }
  return diff == 0;
}

}  // namespace

int match_api_key(const std::vector<std::string>& keys, std::string_view authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.substr(0, kScheme.size()) != kScheme) return -1;
  const std::string_view given = authorization.substr(kScheme.size());
  int found = -1;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (constant_time_equal(given, keys[i]) && found < 0) found = (int)i;
  }
  return found;
}

}  // namespace chimera::server
