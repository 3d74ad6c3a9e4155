// SteppedGeneration: a worker thread advanced one step per owner call.
#include "server/stepped_generation.h"

namespace chimera::server {

SteppedGeneration::SteppedGeneration(Body body) {
  thread_ = std::thread([this, body = std::move(body)] {
    bool aborted;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return run_ || abort_; });
      aborted = abort_;
    }
    std::optional<Result<runtime::GenerateStats>> r;
    if (aborted) {
      r.emplace(unsupported("generation aborted before it started"));
    } else {
      r.emplace(body([this] { return hook(); }));
    }
    std::lock_guard<std::mutex> lk(mu_);
    result_ = std::move(r);
    finished_ = true;
    run_ = false;
    cv_.notify_all();
  });
}

SteppedGeneration::~SteppedGeneration() { abort(); }

bool SteppedGeneration::hook() {
  std::unique_lock<std::mutex> lk(mu_);
  if (first_hook_) {  // the first step() covers the setup and the first step
    first_hook_ = false;
    ++steps_;
    return !abort_;
  }
  run_ = false;  // parked: the owner's step() returns
  cv_.notify_all();
  cv_.wait(lk, [&] { return run_ || abort_; });
  if (abort_) return false;
  ++steps_;
  return true;
}

bool SteppedGeneration::step() {
  std::unique_lock<std::mutex> lk(mu_);
  if (finished_) return false;
  run_ = true;
  cv_.notify_all();
  cv_.wait(lk, [&] { return !run_ || finished_; });
  return !finished_;
}

void SteppedGeneration::abort() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SteppedGeneration::finished() const {
  std::lock_guard<std::mutex> lk(mu_);
  return finished_;
}

}  // namespace chimera::server
