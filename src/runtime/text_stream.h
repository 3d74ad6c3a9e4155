// Incremental detokenisation with stop strings, shared by the server engine
// and the C API's generate: text that could still become the start of a stop
// string is held back until it cannot, so a stop string spanning token
// boundaries is never emitted, nor anything after it. Output is complete
// UTF-8 only (tokenizer::StreamDecoder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace chimera::runtime {

class TextStream {
 public:
  // stops: non-empty strings (the caller refuses empty ones).
  TextStream(const tokenizer::Tokenizer& tok, std::vector<std::string> stops, bool render_special)
      : dec_(tok, render_special), stops_(std::move(stops)) {}
  // The text that token completes and that can no longer start a stop
  // string; *stopped: a stop string was found (the text before it is returned
  // and nothing more should be pushed).
  std::string push(int32_t tok, bool* stopped);
  // The rest at the end of generation (an incomplete UTF-8 tail becomes U+FFFD).
  std::string flush(bool* stopped);

 private:
  std::string drain(bool final, bool* stopped);

  tokenizer::StreamDecoder dec_;
  std::vector<std::string> stops_;
  std::string pending_;
};

}  // namespace chimera::runtime
