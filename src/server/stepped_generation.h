// Runs one long generation (a Generator::generate() call, e.g. a diffusion
// request) on its own thread, one bounded step at a time: the generation's
// on_step hook parks the worker until the owner calls step() again. Exactly
// one of the owner and the worker runs at any moment (a mutex handshake), so
// the model — not thread-safe — is never used by both, and the owner's loop
// (admission, cancellation, other sequences) runs between steps.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "core/status.h"
#include "runtime/generator.h"

namespace chimera::server {

class SteppedGeneration {
 public:
  // body runs on the worker; it must call on_step before each unit of work and
  // stop when it returns false (GenerateOptions::on_step does both).
  using Body = std::function<Result<runtime::GenerateStats>(const std::function<bool()>& on_step)>;
  explicit SteppedGeneration(Body body);
  ~SteppedGeneration();  // abort() + join
  SteppedGeneration(const SteppedGeneration&) = delete;
  SteppedGeneration& operator=(const SteppedGeneration&) = delete;

  // Lets the worker run one step (the first also covers the setup before it);
  // returns when it is parked before the next step or has finished. False
  // once finished.
  bool step();
  // Makes the pending (and every later) on_step return false and waits for
  // the worker to end; no model work runs after it.
  void abort();
  bool finished() const;
  // The body's result; valid once finished().
  const Result<runtime::GenerateStats>& result() const { return *result_; }
  int64_t steps() const { return steps_; }

 private:
  bool hook();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool run_ = false;       // owner -> worker: go on (cleared by the worker when it parks)
  bool abort_ = false;
  bool finished_ = false;
  bool first_hook_ = true;
  int64_t steps_ = 0;
  std::optional<Result<runtime::GenerateStats>> result_;
  std::thread thread_;
};

}  // namespace chimera::server
