// The serving engine: one loop thread that owns a models::Context on the
// model (scratch, KV types), every sequence state and the prefix cache, and runs continuous batching. Usable as a
// library without HTTP: submit() token ids + parameters, read StreamEvents
// from the returned RequestChannel.
//
// Each loop iteration: take new submissions into a FIFO queue; drop cancelled
// requests; admit from the queue head while the running count is below
// max_running and the memory budget allows (each admitted sequence reserves
// what its prompt + max_tokens positions take, SequenceState::bytes_at — its
// KV blocks are allocated only as tokens arrive and released when it ends —
// plus prefix-cache bytes, LRU cache entries evicted first); then build a
// step plan — one decode token for every decoding sequence plus prefill chunks (at most
// prefill_chunk prompt tokens per iteration, oldest sequence first) — execute
// it, and sample / emit / finish. Decodes progress every iteration and the
// prefill budget is bounded, so no admitted request starves; admission is
// FIFO, so no queued one does either. execute_plan runs the whole step as one
// fused multi-sequence forward (Context::forward_batch: every weight streamed
// once per step for all sequences, results bit-identical to one forward per
// sequence). Diffusion requests are runtime::DiffusionJobs: each iteration
// runs the next denoising step of every running one as a single fused forward
// over all their canvas slices (models::diffusion_forward_batch, bit-identical
// to each alone), so several interleave, none holds the loop, and N requests
// cost one forward per step, not N.
//
// Several choices (GenerationParams::n > 1): the request is admitted only
// when n slots and n states fit (it counts as n running sequences); the
// prompt is prefilled once, by choice 0, and when its last prompt token's
// logits arrive the state is forked (SequenceState::copy_from, as the prefix
// cache restores) into the other choices, which then decode independently
// with their own sampler (seed + index), stop strings, grammar and logprobs.
//
// Invariants: only the loop thread runs the engine's context, the states and
// the cache; HTTP threads use only submit(), tokenizer() (immutable, thread-safe)
// and RequestChannel. Every submitted request gets exactly one final event
// (done = true) per choice, whatever happens (finish, cancel, error,
// shutdown); events carry their choice's index. Text is
// emitted only as complete UTF-8 and never contains a stop string or text
// after it. Greedy outputs equal the single-sequence generator's: the forward
// pass is row-independent, so chunking and prefix restore change nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/context.h"
#include "models/model.h"
#include "runtime/diffusion_options.h"
#include "runtime/grammar/grammar_constraint.h"
#include "runtime/sampler.h"
#include "server/metrics.h"

namespace chimera::server {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens restored from the prefix cache
};

struct GenerationParams {
  std::vector<int32_t> prompt;        // non-empty, ids in range
  int64_t max_tokens = 16;            // >= 1; generation also ends at the context end
  runtime::SamplingParams sampling;
  std::vector<std::string> stop;      // stop strings (never emitted)
  bool ignore_eos = false;
  std::vector<int64_t> checkpoints;   // prompt positions worth a recurrent checkpoint (turn ends)
  // Chat turns: given the reply text (as sent to the client), returns the
  // token sequence the *next* turn's prompt will start with (prompt + reply +
  // the template's end-of-turn text). When it starts with `prompt`, the engine
  // snapshots the state after exactly those tokens at the end of the request
  // (feeding what is missing), so the next turn restores it whole — the only
  // way a recurrent state is reusable. Called on the engine loop thread.
  std::function<std::vector<int32_t>(const std::string& reply)> turn_tokens;
  // Prefix-cache partition: a request restores only snapshots made by
  // requests with the same scope (the server derives it from the API key and
  // the request's cache_salt), so cached_tokens and timing reveal nothing
  // about other scopes' prompts.
  std::string cache_scope;
  int top_logprobs = -1;              // -1: no logprobs; N >= 0: chosen token + top N per token
  runtime::DiffusionOptions diffusion;  // diffusion LMs only (steps, block length, caches, ...)
  // Grammar-constrained output (response_format, "grammar"): compiled by
  // submit() against the model's vocabulary (errors -> invalid_argument);
  // autoregressive models only.
  std::optional<runtime::grammar::GrammarSource> grammar;
  // Special tokens appear in the text (tool calls: `<|tool_call|>` is a
  // control token in some vocabularies); end-of-generation tokens never do.
  bool render_special = false;
  // Choices sampled from one prefill (1 ..= max_choices()); choice i samples
  // with seed sampling.seed + i (mod 2^64), so it equals a request with n = 1
  // and that seed. Autoregressive models only.
  int n = 1;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;                              // log-softmax of the raw model logits
  std::vector<std::pair<int32_t, float>> top;     // top_logprobs most likely (id, logprob)
};

struct StreamEvent {
  int index = 0;     // the choice (0 .. n-1)
  std::string text;  // new text (may be empty)
  bool done = false;
  FinishReason finish = FinishReason::kNone;
  std::vector<TokenLogprob> logprobs;  // one per token emitted with this event (when asked)
  Usage usage;        // final event only
  std::string error;  // final event of a failed request
};

// One request's channel between the engine (producer) and an HTTP thread.
class RequestChannel {
 public:
  // Moves pending events into *out; waits up to `timeout` when none. False on timeout.
  bool pop(std::vector<StreamEvent>* out, std::chrono::milliseconds timeout);
  // Asks the engine to stop this request and free its slot (idempotent).
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  void push(StreamEvent ev);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  int64_t n_ctx = 4096;               // per-sequence context
  int max_running = 4;                // sequences admitted at once
  size_t mem_budget_bytes = 0;        // states + prefix cache; 0 = 2 x max_running full-context states
  int64_t prefill_chunk = 256;        // prompt tokens per iteration (all sequences)
  bool prefix_cache = true;
  int64_t checkpoint_interval = 256;  // recurrent states: checkpoint every N prompt tokens
  size_t max_queue = 1024;            // waiting requests beyond this are refused
  // KV cache storage of the engine's states (start() checks them); unset: the
  // model's default (Model::default_kv_types).
  std::optional<layers::KvCacheTypes> kv_types;
};

struct EngineCounters {
  int64_t waiting = 0, running = 0;
};

class Engine {
 public:
  // metrics may be null. The model must outlive the engine. The engine runs
  // on its own models::Context (scratch, KV types), so other callers may use
  // the same model at the same time (with another thread pool).
  Engine(const models::Model& model, ThreadPool* pool, const EngineOptions& opts, Metrics* metrics);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks the options against the model (budget holds one state, ...).
  Status start();
  // Ends every request (final event, reason cancelled) and joins the loop.
  void stop();

  // Thread-safe. Errors: kInvalidArgument (bad prompt / length), kOutOfRange
  // (queue full), kUnsupported (engine stopped).
  Result<std::shared_ptr<RequestChannel>> submit(GenerationParams p);

  const tokenizer::Tokenizer& tokenizer() const { return model_.tokenizer(); }
  const models::ModelInfo& info() const { return model_.info(); }
  int64_t n_ctx() const { return opts_.n_ctx; }
  // Bytes of one state at a full context (n_ctx positions); states allocate
  // KV blocks as tokens arrive.
  size_t state_bytes() const { return state_bytes_; }
  size_t budget_bytes() const { return budget_; }
  // The largest n a request may ask for: the running-sequence limit
  // (--parallel) and the states the memory budget holds; 1 for diffusion models.
  int max_choices() const;
  // OK when a request may ask for n choices; else kInvalidArgument saying
  // what bounds n (submit() checks it too; the server answers 400 naming "n").
  Status check_choices(int n) const;
  EngineCounters counters() const;

 private:
  struct Sequence;
  struct WorkItem {
    Sequence* seq;
    int64_t n;         // tokens fed from seq->tokens[seq->n_fed ..]
    bool logits;       // wants the last row's logits
    float* out;        // logits row (n_vocab floats) when logits
  };

  void loop();
  void take_submissions(std::deque<std::unique_ptr<Sequence>>& incoming);
  void admit();
  int running_slots() const;
  size_t reservation(const Sequence& s);
  std::unique_ptr<layers::SequenceState> acquire_state(size_t reserve);
  void release_state(std::unique_ptr<layers::SequenceState> st, size_t reserved);
  void fork_choices(Sequence& s, const float* logits);
  void sample_and_emit(Sequence& s, float* logits);
  int32_t draw(Sequence& s, float* logits) const;
  void add_logprobs(Sequence& s, const float* raw_row, int32_t tok) const;
  bool ensure_room(size_t need);
  void restore_prefix(Sequence& s);
  std::vector<WorkItem> plan_step();
  Status execute_plan(std::vector<WorkItem>& plan);
  void after_forward(std::vector<WorkItem>& plan);
  void emit_token(Sequence& s, int32_t tok);
  void publish_token(Sequence& s, int32_t tok);
  void finish(Sequence& s, FinishReason r, const std::string& error = "");
  void maybe_checkpoint(Sequence& s);
  void snapshot_into_cache(Sequence& s);
  void snapshot_turn(Sequence& s);
  bool start_diffusion(Sequence& s);  // false: s finished (error, or nothing to generate)
  void step_diffusion();              // one fused denoising step of every running diffusion request
  int64_t next_chunk_end(const Sequence& s, int64_t budget) const;
  void publish_gauges();

  const models::Model& model_;
  models::Context ctx_;  // every forward of the loop; states made with its KV types
  std::once_flag vocab_once_;  // grammar token tables, built on the first constrained request
  std::shared_ptr<const runtime::grammar::TokenVocab> vocab_;
  ThreadPool* pool_;
  EngineOptions opts_;
  Metrics* metrics_;
  size_t state_bytes_ = 0;
  size_t budget_ = 0;
  bool recurrent_ = false;

  // Shared with submitters.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> inbox_;
  bool stopping_ = false;
  bool started_ = false;
  std::atomic<int64_t> n_waiting_{0}, n_running_{0};
  uint64_t next_id_ = 1;

  // Loop-thread only.
  std::deque<std::unique_ptr<Sequence>> queue_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<std::unique_ptr<layers::SequenceState>> free_states_;  // reset: no KV block held
  size_t pooled_bytes_ = 0;    // their bytes (recurrent / ring states; KV blocks are released)
  size_t reserved_bytes_ = 0;  // Sequence::reserved of the states in use
  std::unique_ptr<class PrefixCache> cache_;
  std::vector<float> logits_;
  std::thread thread_;
};

}  // namespace chimera::server
