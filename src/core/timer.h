// Wall-clock timing helpers.
#pragma once

#include <chrono>

namespace chimera {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

class Stopwatch {
 public:
  Stopwatch() : t0_(now_seconds()) {}
  double elapsed() const { return now_seconds() - t0_; }
  void reset() { t0_ = now_seconds(); }

 private:
  double t0_;
};

}  // namespace chimera
