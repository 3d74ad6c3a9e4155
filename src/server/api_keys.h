// API keys of `chimera serve`: which configured key (if any) an
// Authorization header presents. Several keys may be configured (one per
// client or team); the key's index is the caller's identity for prefix-cache
// scoping (prompt_builder.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace chimera::server {

// Index of the key that `authorization` ("Bearer KEY") presents, -1 when it
// presents none of them. Every key is compared in full, in time that depends
// only on the lengths, never on where the bytes differ.
int match_api_key(const std::vector<std::string>& keys, std::string_view authorization);

}  // namespace chimera::server
