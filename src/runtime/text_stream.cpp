// Stop-string scanning over streamed text (see text_stream.h).
#include "runtime/text_stream.h"

#include <algorithm>

namespace chimera::runtime {

std::string TextStream::push(int32_t tok, bool* stopped) {
  pending_ += dec_.push(tok);
  return drain(false, stopped);
}

std::string TextStream::flush(bool* stopped) {
  pending_ += dec_.flush();
  return drain(true, stopped);
}

std::string TextStream::drain(bool final, bool* stopped) {
  *stopped = false;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    *stopped = true;
    return out;
  }
  size_t keep = 0;
  if (!final) {
    for (const auto& s : stops_) {
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > keep; --k) {
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

}  // namespace chimera::runtime
