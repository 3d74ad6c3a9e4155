// Generation behind one interface: the CLI (`run`, `chat`), the server and the
// benchmarks drive a Generator and never branch on the model family. The
// autoregressive generator keeps its sequence state between calls, so a chat
// turn only feeds the new tokens. (The diffusion generator of the masked-LM
// issue implements the same interface.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/diffusion_options.h"
#include "runtime/sampler.h"

namespace chimera::runtime {

namespace grammar {
class GrammarMatcher;
}

struct GenerateOptions {
  int64_t n_predict = 128;   // maximum new tokens (< 0: until EOG or context end)
  bool stop_at_eog = true;
  SamplingParams sampling;
  DiffusionOptions diffusion;  // masked diffusion LMs only (runtime/diffusion.h)
  // Called before each bounded unit of model work (diffusion: every denoising
  // step); false stops the call without emitting the unfinished block. (The
  // server steps runtime::DiffusionJobs itself, fused across requests.)
  std::function<bool()> on_step;
  // Grammar-constrained sampling (runtime/grammar/grammar_constraint.h): each
  // step samples only tokens the matcher allows and advances it; generation
  // ends at an end-of-generation token (allowed once the grammar is complete,
  // whatever stop_at_eog says) or when nothing may follow. Autoregressive
  // models only. Not owned.
  grammar::GrammarMatcher* grammar = nullptr;
};

struct GenerateStats {
  int64_t n_prompt = 0;      // tokens fed this call
  int64_t n_generated = 0;
  double prompt_seconds = 0; // prefill time
  double gen_seconds = 0;    // decode time (after the first token)
  double ttft_seconds = 0;   // call start -> first generated token
  bool stopped_at_eog = false;
  int32_t eog_token = -1;    // the end-of-generation token that stopped it (fed next call)
  bool hit_context_limit = false;
  bool grammar_complete = false;  // stopped because the grammar allows nothing more
};

// Called for every generated token; return false to stop.
using TokenCallback = std::function<bool(int32_t token)>;

class Generator {
 public:
  virtual ~Generator() = default;
  // Appends `prompt` to the sequence and generates up to n_predict tokens.
  virtual Result<GenerateStats> generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                         const TokenCallback& on_token) = 0;
  // Forgets the sequence (next call starts from an empty context).
  virtual void reset() = 0;
  virtual int64_t n_past() const = 0;
  virtual int64_t n_ctx() const = 0;
};

// Everything an autoregressive sequence holds between calls. Invariant:
// history.size() == state->n_past() + pending.size() (pending tokens are in
// the history but not yet in the state). The C API saves and restores it
// whole (runtime/session_io.h).
struct SequenceSession {
  std::unique_ptr<layers::SequenceState> state;
  std::vector<float> logits;       // after the last fed token (n_vocab floats), when have_logits
  bool have_logits = false;
  std::vector<int32_t> history;    // every token of the sequence (penalties)
  std::vector<int32_t> pending;    // generated but not yet fed
};

class AutoregressiveGenerator final : public Generator {
 public:
  // Runs on its own context (scratch; states with ctx's KV types).
  AutoregressiveGenerator(models::Context ctx, int64_t n_ctx, ThreadPool* pool);
  // A fresh context on model (f32 KV caches).
  AutoregressiveGenerator(const models::Model& model, int64_t n_ctx, ThreadPool* pool)
      : AutoregressiveGenerator(model.new_context(), n_ctx, pool) {}
  Result<GenerateStats> generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                 const TokenCallback& on_token) override;
  void reset() override;
  int64_t n_past() const override { return s_.state->n_past() + (int64_t)s_.pending.size(); }
  int64_t n_ctx() const override { return s_.state->n_ctx(); }

  // Appends tokens[0..n) to the sequence without sampling (the pending token,
  // if any, is fed first; n may be 0 to feed only that). rows, when not null,
  // gets one logits row of n_vocab floats per token of `tokens`. Afterwards
  // the session's logits are the last token's. On an error (bad id, context
  // overflow) the tokens are not part of the sequence.
  Status feed(const int32_t* tokens, int64_t n, float* rows);
  // The sequence (for saving / restoring it; keep the invariant above).
  SequenceSession& session() { return s_; }
  const SequenceSession& session() const { return s_; }

 private:
  models::Context ctx_;
  ThreadPool* pool_;
  SequenceSession s_;
};

// Builds the generator ctx's model calls for, running on ctx.
std::unique_ptr<Generator> make_generator(models::Context ctx, int64_t n_ctx, ThreadPool* pool);
// The same on a fresh context of model (f32 KV caches).
std::unique_ptr<Generator> make_generator(const models::Model& model, int64_t n_ctx, ThreadPool* pool);

}  // namespace chimera::runtime
