// The engine loop: admission, step planning, execution, sampling, emission,
// prefix-cache snapshots. See engine.h for the scheduling contract.
//
// Token bookkeeping per sequence: `tokens` holds the prompt followed by every
// generated token that will be fed; state->n_past() (= n_fed) counts those
// already processed. While prefilling, n_fed < n_prompt; while decoding,
// tokens.size() == n_fed + 1 (the sampled token not yet fed). A step item
// feeds tokens[n_fed, n_fed + n) and, when asked, yields the logits of the
// last one, which is then sampled.
#include "server/engine.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/timer.h"
#include "runtime/diffusion_job.h"
#include "runtime/generator.h"
#include "runtime/grammar/constrained_sampling.h"
#include "runtime/text_stream.h"
#include "server/prefix_cache.h"
#include "tokenizer/tokenizer.h"

namespace chimera::server {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
    default: return "none";
  }
}

bool RequestChannel::pop(std::vector<StreamEvent>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (events_.empty() && !cv_.wait_for(lk, timeout, [&] { return !events_.empty(); })) return false;
  while (!events_.empty()) {
    out->push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return true;
}

void RequestChannel::push(StreamEvent ev) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

struct Engine::Sequence {
  uint64_t id = 0;
  GenerationParams p;
  std::shared_ptr<RequestChannel> ch;
  std::unique_ptr<layers::SequenceState> state;
  size_t reserved = 0;  // budget bytes held for state: what prompt + max_tokens positions take
  std::vector<int32_t> tokens;
  int64_t n_prompt = 0, n_cached = 0, n_generated = 0;
  std::unique_ptr<runtime::Sampler> sampler;
  std::unique_ptr<runtime::TextStream> text;
  std::string out_text;             // everything sent to the client
  std::vector<TokenLogprob> pending_lp;  // logprobs of tokens not yet sent
  double t_submit = 0, t_last = 0;
  bool stop_hit = false;
  bool done = false;
  // Diffusion: the request's generation, advanced one denoising step per
  // iteration (fused with the other requests'); its conditional canvas uses
  // `state`, the unconditional one (guidance) `uncond`.
  std::unique_ptr<runtime::DiffusionJob> djob;
  std::unique_ptr<layers::SequenceState> uncond;
  std::optional<runtime::grammar::GrammarMatcher> grammar;  // constrained output
  std::vector<uint64_t> allowed;                            // scratch: the grammar's token mask
  int index = 0;                                   // the choice this sequence samples
  std::vector<std::unique_ptr<Sequence>> forks;    // choices 1..n-1 until the prompt is prefilled and forked
  int64_t n_fed() const { return state->n_past(); }
  bool prefilling() const { return n_fed() < n_prompt; }
};

Engine::Engine(const models::Model& model, ThreadPool* pool, const EngineOptions& opts, Metrics* metrics)
    : model_(model), ctx_(model), pool_(pool), opts_(opts), metrics_(metrics), cache_(std::make_unique<PrefixCache>()) {}

Engine::~Engine() { stop(); }

Status Engine::start() {
  if (opts_.n_ctx < 2) return invalid_argument("the context size must be at least 2");
  if (opts_.max_running < 1) return invalid_argument("--parallel must be at least 1");
  if (opts_.prefill_chunk < 1) opts_.prefill_chunk = 1;
  if (opts_.checkpoint_interval < 1) opts_.checkpoint_interval = 256;
  if (opts_.kv_types) CHIMERA_RETURN_IF_ERROR(ctx_.set_kv_types(*opts_.kv_types));
  auto probe = ctx_.new_state(opts_.n_ctx);
  state_bytes_ = probe->bytes(true);  // a full context; KV blocks are allocated as tokens arrive
  recurrent_ = probe->has_recurrent();
  budget_ = opts_.mem_budget_bytes ? opts_.mem_budget_bytes : 2 * (size_t)opts_.max_running * state_bytes_;
  if (budget_ < state_bytes_)
    return invalid_argument("the memory budget (" + std::to_string(budget_ >> 20) + " MiB) is smaller than one " +
                            std::to_string(opts_.n_ctx) + "-token sequence state (" +
                            std::to_string((state_bytes_ + (1 << 20) - 1) >> 20) + " MiB); raise it or lower -c");
  pooled_bytes_ = probe->bytes();
  free_states_.push_back(std::move(probe));
  logits_.resize((size_t)model_.info().n_vocab);
  std::lock_guard<std::mutex> lk(mu_);
  if (started_) return invalid_argument("engine already started");
  started_ = true;
  thread_ = std::thread([this] { loop(); });
  return Status::ok();
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Requests submitted after the loop exited (or without a loop) still get their final event.
  std::deque<std::unique_ptr<Sequence>> rest;
  {
    std::lock_guard<std::mutex> lk(mu_);
    rest.swap(inbox_);
  }
  for (auto& s : rest) finish(*s, FinishReason::kCancelled);
}

EngineCounters Engine::counters() const { return {n_waiting_.load(), n_running_.load()}; }

Result<std::shared_ptr<RequestChannel>> Engine::submit(GenerationParams p) {
  if (p.prompt.empty()) return invalid_argument("the prompt is empty");
  const int64_t nv = model_.info().n_vocab;
  for (int32_t t : p.prompt)
    if (t < 0 || t >= nv)
      return invalid_argument("token id " + std::to_string(t) + " is out of range [0, " + std::to_string(nv) + ")");
  if ((int64_t)p.prompt.size() > opts_.n_ctx)
    return invalid_argument("the prompt has " + std::to_string(p.prompt.size()) +
                            " tokens, more than the context size " + std::to_string(opts_.n_ctx));
  if (p.max_tokens < 1) return invalid_argument("max_tokens must be at least 1");
  if (Status st = check_choices(p.n); !st) return st;
  for (const auto& s : p.stop)
    if (s.empty()) return invalid_argument("stop strings must not be empty");
  auto seq = std::make_unique<Sequence>();
  if (p.grammar) {
    if (model_.info().is_diffusion)
      return invalid_argument("grammar-constrained output (response_format, grammar) is not supported for diffusion models");
    std::call_once(vocab_once_, [&] { vocab_ = runtime::grammar::TokenVocab::from_tokenizer(model_.tokenizer()); });
    auto g = runtime::grammar::CompiledGrammar::compile(*p.grammar, vocab_);
    if (!g) return invalid_argument(g.status().message());
    seq->grammar.emplace(*g);
  }
  seq->ch = std::make_shared<RequestChannel>();
  seq->t_submit = now_seconds();
  seq->n_prompt = (int64_t)p.prompt.size();
  seq->tokens = p.prompt;
  seq->text = std::make_unique<runtime::TextStream>(model_.tokenizer(), p.stop, p.render_special);
  std::sort(p.checkpoints.begin(), p.checkpoints.end());
  seq->p = std::move(p);
  // Choices 1..n-1: copies with their own seed, text stream and grammar
  // matcher; they get the prompt's state when choice 0 has prefilled it.
  for (int i = 1; i < seq->p.n; ++i) {
    auto f = std::make_unique<Sequence>();
    f->p = seq->p;
    f->p.n = 1;
    f->p.sampling.seed = seq->p.sampling.seed + (uint64_t)i;
    f->index = i;
    f->ch = seq->ch;
    f->t_submit = seq->t_submit;
    f->n_prompt = seq->n_prompt;
    f->tokens = seq->tokens;
    f->text = std::make_unique<runtime::TextStream>(model_.tokenizer(), f->p.stop, f->p.render_special);
    f->grammar = seq->grammar;
    seq->forks.push_back(std::move(f));
  }
  auto ch = seq->ch;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ || !started_) return unsupported("the engine is not running");
    if ((size_t)n_waiting_.load() >= opts_.max_queue)
      return out_of_range("too many requests are waiting (" + std::to_string(opts_.max_queue) + "); retry later");
    seq->id = next_id_++;
    inbox_.push_back(std::move(seq));
    n_waiting_.fetch_add(1);
  }
  cv_.notify_all();
  return ch;
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (queue_.empty() && running_.empty())
        cv_.wait_for(lk, std::chrono::milliseconds(200), [&] { return stopping_ || !inbox_.empty(); });
      if (stopping_) break;
      while (!inbox_.empty()) {
        queue_.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
    }
    // Cancelled requests leave the queue at once; running ones free their slot.
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->ch->cancelled()) {
        finish(**it, FinishReason::kCancelled);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& s : running_)
      if (s->ch->cancelled()) finish(*s, FinishReason::kCancelled);
    std::erase_if(running_, [](const auto& s) { return s->done; });
    admit();
    if (!running_.empty()) {
      if (model_.info().is_diffusion) {
        step_diffusion();  // one denoising step of every running request, one fused forward
      } else {
        std::vector<WorkItem> plan = plan_step();
        Status st = execute_plan(plan);
        if (st) after_forward(plan);
      }
      std::erase_if(running_, [](const auto& s) { return s->done; });
    }
    publish_gauges();
  }
  for (auto& s : running_) finish(*s, FinishReason::kCancelled);
  running_.clear();
  for (auto& s : queue_) finish(*s, FinishReason::kCancelled);
  queue_.clear();
  publish_gauges();
}

int Engine::max_choices() const {
  if (model_.info().is_diffusion) return 1;
  const size_t by_memory = state_bytes_ ? budget_ / state_bytes_ : 1;
  return (int)std::max<size_t>(1, std::min<size_t>((size_t)opts_.max_running, by_memory));
}

Status Engine::check_choices(int n) const {
  if (n == 1) return Status::ok();
  if (model_.info().is_diffusion)
    return invalid_argument("n > 1 is not supported for diffusion models (a canvas is not forked); send n = 1");
  if (n < 1 || n > max_choices())
    return invalid_argument("'n' must be between 1 and " + std::to_string(max_choices()) +
                            " on this server (the sequences that run at once, --parallel, and fit the memory "
                            "budget; got " + std::to_string(n) + ")");
  return Status::ok();
}

int Engine::running_slots() const {
  int n = 0;
  for (const auto& s : running_) n += 1 + (int)s->forks.size();
  return n;
}

void Engine::publish_gauges() {
  n_waiting_.store((int64_t)queue_.size() + [&] {
    std::lock_guard<std::mutex> lk(mu_);
    return (int64_t)inbox_.size();
  }());
  n_running_.store((int64_t)running_slots());
  if (!metrics_) return;
  EngineGauges g;
  g.waiting = n_waiting_.load();
  g.running = n_running_.load();
  size_t held = pooled_bytes_;  // allocated now: grows with the tokens in use
  for (const auto& s : running_) held += (s->state ? s->state->bytes() : 0) + (s->uncond ? s->uncond->bytes() : 0);
  g.state_bytes = (int64_t)held;
  g.cache_bytes = (int64_t)cache_->bytes();
  g.cache_entries = (int64_t)cache_->entries();
  g.budget_bytes = (int64_t)budget_;
  metrics_->set_gauges(g);
}

bool Engine::ensure_room(size_t need) {
  while (reserved_bytes_ + pooled_bytes_ + cache_->bytes() + need > budget_) {
    if (!free_states_.empty()) {
      pooled_bytes_ -= free_states_.back()->bytes();
      free_states_.pop_back();
    } else if (!cache_->evict_lru()) {
      return false;
    }
  }
  return true;
}

size_t Engine::reservation(const Sequence& s) {
  // A pooled state tells what n positions take. With the pool empty, the state
  // the admission will take is made now (instead of a throwaway one: a fresh
  // state allocates its recurrent layers in full).
  const int64_t n = std::min<int64_t>(opts_.n_ctx, s.n_prompt + std::max<int64_t>(s.p.max_tokens, 1));
  if (free_states_.empty()) {
    auto st = ctx_.new_state(opts_.n_ctx);
    pooled_bytes_ += st->bytes();
    free_states_.push_back(std::move(st));
  }
  const size_t bytes = free_states_.back()->bytes_at(n);
  // Diffusion with guidance evaluates a second (unconditional) canvas on its own state.
  return model_.info().is_diffusion && s.p.diffusion.cfg_scale > 0 ? 2 * bytes : bytes;
}

std::unique_ptr<layers::SequenceState> Engine::acquire_state(size_t reserve) {
  if (!ensure_room(reserve)) return nullptr;
  reserved_bytes_ += reserve;
  if (!free_states_.empty()) {
    auto st = std::move(free_states_.back());
    free_states_.pop_back();
    pooled_bytes_ -= st->bytes();
    return st;  // reset when released
  }
  return ctx_.new_state(opts_.n_ctx);
}

void Engine::release_state(std::unique_ptr<layers::SequenceState> st, size_t reserved) {
  reserved_bytes_ -= reserved;
  st->reset();  // releases its KV blocks now
  if ((int)free_states_.size() < opts_.max_running) {
    pooled_bytes_ += st->bytes();
    free_states_.push_back(std::move(st));
  }
}

void Engine::admit() {
  while (!queue_.empty()) {
    Sequence& s = *queue_.front();
    // A request with n choices takes n slots and n states, all or none.
    const int need = 1 + (int)s.forks.size();
    if (running_slots() + need > opts_.max_running) break;
    const size_t reserve = reservation(s);
    std::vector<std::unique_ptr<layers::SequenceState>> got;
    while ((int)got.size() < need) {
      auto st = acquire_state(reserve);
      if (!st) break;
      got.push_back(std::move(st));
    }
    if ((int)got.size() < need) {  // FIFO: the head waits for memory
      for (auto& st : got) release_state(std::move(st), reserve);
      break;
    }
    s.state = std::move(got[0]);
    s.reserved = reserve;
    for (size_t i = 1; i < got.size(); ++i) {
      s.forks[i - 1]->state = std::move(got[i]);
      s.forks[i - 1]->reserved = reserve;
    }
    restore_prefix(s);
    s.sampler = std::make_unique<runtime::Sampler>(s.p.sampling);
    for (int32_t t : s.p.prompt) s.sampler->accept(t);
    for (auto& f : s.forks) {
      f->sampler = std::make_unique<runtime::Sampler>(f->p.sampling);
      for (int32_t t : f->p.prompt) f->sampler->accept(t);
    }
    if (metrics_) {
      metrics_->observe_queue(now_seconds() - s.t_submit);
      metrics_->add_prompt_tokens(s.n_prompt);
    }
    running_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

void Engine::restore_prefix(Sequence& s) {
  if (!opts_.prefix_cache || model_.info().is_diffusion) return;
  // At least one prompt token is always fed: its logits give the first token.
  PrefixCache::Hit hit = cache_->lookup(s.p.cache_scope, s.p.prompt, s.n_prompt - 1);
  int64_t n = 0;
  if (hit.n_tokens > 0) {
    Status st = s.state->copy_from(*hit.state);
    if (st && hit.truncate) st = s.state->truncate(hit.n_tokens);
    if (st) {
      n = hit.n_tokens;
    } else {
      s.state->reset();
    }
  }
  s.n_cached = n;
  if (metrics_) metrics_->add_prefix_cache(s.n_prompt, n);
}

int64_t Engine::next_chunk_end(const Sequence& s, int64_t budget) const {
  const int64_t fed = s.n_fed();
  int64_t end = std::min(s.n_prompt, fed + budget);
  if (recurrent_ && opts_.prefix_cache) {
    // Chunks end on checkpoint positions so the state there can be snapshotted.
    const int64_t every = (fed / opts_.checkpoint_interval + 1) * opts_.checkpoint_interval;
    end = std::min(end, every);
    for (int64_t b : s.p.checkpoints)
      if (b > fed && b < end) end = b;
  }
  return end;
}

std::vector<Engine::WorkItem> Engine::plan_step() {
  std::vector<WorkItem> plan;
  for (auto& s : running_)
    if (!s->prefilling()) plan.push_back({s.get(), (int64_t)s->tokens.size() - s->n_fed(), true, nullptr});
  // Prefill in admission order within a bounded token budget: the oldest
  // prompt finishes first; decodes above are never held back by prompts.
  int64_t budget = opts_.prefill_chunk;
  for (auto& s : running_) {
    if (!s->prefilling() || budget <= 0) continue;
    const int64_t end = next_chunk_end(*s, budget);
    const int64_t n = end - s->n_fed();
    budget -= n;
    plan.push_back({s.get(), n, end == s->n_prompt, nullptr});
  }
  size_t rows = 0;
  for (const auto& w : plan) rows += w.logits;
  const size_t nv = (size_t)model_.info().n_vocab;
  if (logits_.size() < rows * nv) logits_.resize(rows * nv);
  size_t r = 0;
  for (auto& w : plan)
    if (w.logits) w.out = logits_.data() + (r++) * nv;
  return plan;
}

Status Engine::execute_plan(std::vector<WorkItem>& plan) {
  // One fused multi-sequence forward for the whole step: each weight is
  // streamed once for all sequences (Context::forward_batch; bit-identical to
  // one forward per sequence).
  std::vector<models::BatchItem> items;
  items.reserve(plan.size());
  for (auto& w : plan) {
    Sequence& s = *w.seq;
    items.push_back({s.state.get(), s.tokens.data() + s.n_fed(), w.n,
                     w.logits ? models::Logits::kLast : models::Logits::kNone, w.out});
  }
  if (metrics_) {
    int64_t prefill = 0;
    for (const auto& w : plan)
      if (w.seq->prefilling()) prefill += w.n;
    if (prefill > 0) metrics_->add_prefill_tokens(prefill);
  }
  if (ctx_.forward_batch(items, pool_)) return Status::ok();
  // A bad item fails the whole batch before anything runs: run the items
  // alone so only the faulty sequences end (with their error).
  for (auto& w : plan) {
    Sequence& s = *w.seq;
    Status st = ctx_.forward(*s.state, s.tokens.data() + s.n_fed(), w.n,
                               w.logits ? models::Logits::kLast : models::Logits::kNone, w.out, pool_);
    if (!st) finish(s, FinishReason::kError, st.message());
  }
  return Status::ok();
}

// One generated token of s: latency metrics, stop-string scan, a stream event
// (text and any pending logprobs).
void Engine::publish_token(Sequence& s, int32_t tok) {
  ++s.n_generated;
  const double now = now_seconds();
  if (metrics_) {
    if (s.n_generated == 1)
      metrics_->observe_ttft(now - s.t_submit);
    else
      metrics_->observe_itl(now - s.t_last);
  }
  s.t_last = now;
  StreamEvent ev;
  ev.index = s.index;
  ev.text = s.text->push(tok, &s.stop_hit);
  s.out_text += ev.text;
  ev.logprobs.swap(s.pending_lp);
  if (!ev.text.empty() || !ev.logprobs.empty()) s.ch->push(std::move(ev));
}

// Per item: the prompt checkpoint, the forks of an n > 1 request (before
// its sampler rewrites the row), then the next token. The draws of sequences
// without a grammar (each its own sampler, random stream and logits row: the
// same tokens whatever thread draws them) run on the pool — at 8 streams and
// a 50K vocabulary they were ~1 ms of every ~14 ms step with the other
// threads idle; tokens are emitted afterwards in plan order.
void Engine::after_forward(std::vector<WorkItem>& plan) {
  std::vector<WorkItem*> drawn;
  for (auto& w : plan) {
    Sequence& s = *w.seq;
    if (s.done) continue;
    if (s.n_fed() <= s.n_prompt) maybe_checkpoint(s);
    if (!w.logits) continue;
    if (!s.forks.empty()) fork_choices(s, w.out);
    if (!s.grammar) drawn.push_back(&w);
  }
  std::vector<int32_t> toks(drawn.size());
  parallel_range(drawn.size() > 1 ? pool_ : nullptr, (int64_t)drawn.size(), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) toks[(size_t)i] = draw(*drawn[(size_t)i]->seq, drawn[(size_t)i]->out);
  });
  size_t next = 0;
  for (auto& w : plan) {
    Sequence& s = *w.seq;
    if (s.done || !w.logits) continue;
    if (next < drawn.size() && drawn[next] == &w) {
      emit_token(s, toks[next++]);
    } else {
      sample_and_emit(s, w.out);  // grammar-constrained: on this thread
    }
  }
}

// The prompt of s (choice 0) is prefilled and `logits` are its last token's:
// every other choice gets a copy of the state (the prefix cache's restore
// path, SequenceState::copy_from: KV and recurrent layers alike) and of the
// logits, samples its first token and from then on decodes on its own.
void Engine::fork_choices(Sequence& s, const float* logits) {
  const size_t nv = (size_t)model_.info().n_vocab;
  std::vector<std::unique_ptr<Sequence>> forks;
  forks.swap(s.forks);
  std::vector<float> row;
  for (auto& f : forks) {
    Sequence& c = *f;
    running_.push_back(std::move(f));  // the step iterates its plan, not running_
    c.n_cached = s.n_cached;
    Status st = c.state->copy_from(*s.state);
    if (!st) {
      finish(c, FinishReason::kError, st.message());
      continue;
    }
    row.assign(logits, logits + nv);
    sample_and_emit(c, row.data());
  }
}

// Samples s's next token from `logits` (rewritten in place) and emits it.
void Engine::sample_and_emit(Sequence& s, float* logits) {
  int32_t tok;
  if (s.grammar) {
    const int32_t nv = (int32_t)model_.info().n_vocab;
    std::vector<float> raw;
    if (s.p.top_logprobs >= 0) raw.assign(logits, logits + nv);  // the sampler may rewrite the row
    auto t = runtime::grammar::sample_constrained(*s.sampler, *s.grammar, logits, nv, s.allowed);
    if (!t) return finish(s, FinishReason::kError, t.status().message());
    if (*t < 0) return finish(s, FinishReason::kStop);  // the grammar is complete; nothing may follow
    tok = *t;
    if (!raw.empty()) add_logprobs(s, raw.data(), tok);
  } else {
    tok = draw(s, logits);
  }
  emit_token(s, tok);
}

// s's next token from its sampler (no grammar), with its logprobs when asked
// for. Touches only s (and read-only model data): safe beside other draws.
int32_t Engine::draw(Sequence& s, float* logits) const {
  const int32_t nv = (int32_t)model_.info().n_vocab;
  std::vector<float> raw;
  if (s.p.top_logprobs >= 0) raw.assign(logits, logits + nv);  // the sampler may rewrite the row
  const int32_t tok = s.sampler->sample(logits, nv);
  if (!raw.empty()) add_logprobs(s, raw.data(), tok);
  return tok;
}

// The logprob of tok and the top_logprobs best of the raw row, queued for
// tok's stream event (none for an end-of-generation token).
void Engine::add_logprobs(Sequence& s, const float* raw_row, int32_t tok) const {
  if (!s.p.ignore_eos && model_.tokenizer().is_eog(tok)) return;
  const int32_t nv = (int32_t)model_.info().n_vocab;
  const std::span<const float> raw(raw_row, (size_t)nv);
  float mx = -INFINITY;
  for (float v : raw) mx = std::max(mx, v);
  double sum = 0;
  for (float v : raw) sum += std::exp((double)(v - mx));
  const float lse = mx + (float)std::log(sum);
  TokenLogprob lp;
  lp.id = tok;
  lp.logprob = raw[(size_t)tok] - lse;
  const int32_t k = std::min<int32_t>(s.p.top_logprobs, nv);
  std::vector<int32_t> idx((size_t)nv);
  for (int32_t i = 0; i < nv; ++i) idx[(size_t)i] = i;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return raw[(size_t)a] > raw[(size_t)b] || (raw[(size_t)a] == raw[(size_t)b] && a < b);
  });
  for (int32_t i = 0; i < k; ++i) lp.top.emplace_back(idx[(size_t)i], raw[(size_t)idx[(size_t)i]] - lse);
  s.pending_lp.push_back(std::move(lp));
}

void Engine::maybe_checkpoint(Sequence& s) {
  if (!opts_.prefix_cache) return;
  const int64_t n = s.n_fed();
  bool want = n == s.n_prompt;  // turn boundary: the whole prompt
  if (recurrent_) {
    want = want || n % opts_.checkpoint_interval == 0 ||
           std::binary_search(s.p.checkpoints.begin(), s.p.checkpoints.end(), n);
  }
  if (want) snapshot_into_cache(s);
}

void Engine::snapshot_into_cache(Sequence& s) {
  const int64_t n = s.state ? s.n_fed() : 0;
  if (!opts_.prefix_cache || n <= 0 || model_.info().is_diffusion) return;
  std::span<const int32_t> toks(s.tokens.data(), (size_t)n);
  if (cache_->covers(s.p.cache_scope, toks, !recurrent_)) return;
  auto snap = ctx_.new_state(n);  // shares s.state's KV blocks (copy on write)
  if (!snap->copy_from(*s.state)) return;
  if (!ensure_room(snap->bytes())) return;
  cache_->insert(s.p.cache_scope, std::vector<int32_t>(toks.begin(), toks.end()), std::move(snap));
}

void Engine::snapshot_turn(Sequence& s) {
  // A chat turn's end: snapshot the state after exactly the tokens the next
  // turn's prompt starts with (prompt + reply as the template renders it +
  // end-of-turn), not after the generated ids — those need not be what the
  // reply text tokenizes to, and a recurrent snapshot is usable only whole.
  if (!opts_.prefix_cache || !s.p.turn_tokens || model_.info().is_diffusion) return snapshot_into_cache(s);
  std::vector<int32_t> target = s.p.turn_tokens(s.out_text);
  const int64_t nt = (int64_t)target.size();
  if (nt <= s.n_prompt || nt > opts_.n_ctx || !std::equal(s.p.prompt.begin(), s.p.prompt.end(), target.begin()))
    return snapshot_into_cache(s);
  if (cache_->covers(s.p.cache_scope, target, !recurrent_)) return;
  const int64_t fed = s.n_fed();
  int64_t from = 0;
  while (from < fed && from < nt && s.tokens[(size_t)from] == target[(size_t)from]) ++from;
  if (from < fed) {
    // The state went past the divergence: roll back (KV) or restart from a checkpoint (recurrent).
    if (!recurrent_) {
      if (!s.state->truncate(from)) return snapshot_into_cache(s);
    } else {
      PrefixCache::Hit hit = cache_->lookup(s.p.cache_scope, target, from);
      if (hit.n_tokens < s.n_prompt || hit.truncate) return snapshot_into_cache(s);
      if (!s.state->copy_from(*hit.state)) return;
      from = hit.n_tokens;
    }
  }
  Status st = ctx_.forward(*s.state, target.data() + from, nt - from, models::Logits::kNone, nullptr, pool_);
  if (!st) return;
  s.tokens = std::move(target);
  snapshot_into_cache(s);
}

void Engine::emit_token(Sequence& s, int32_t tok) {
  if (!s.p.ignore_eos && model_.tokenizer().is_eog(tok)) {
    finish(s, FinishReason::kStop);
    return;
  }
  s.sampler->accept(tok);
  publish_token(s, tok);
  if (s.stop_hit) {
    finish(s, FinishReason::kStop);
  } else if (s.n_generated >= s.p.max_tokens || (s.state && s.n_fed() >= opts_.n_ctx)) {
    finish(s, FinishReason::kLength);
  } else {
    s.tokens.push_back(tok);
  }
}

void Engine::finish(Sequence& s, FinishReason r, const std::string& error) {
  if (s.done) return;
  s.done = true;
  s.djob.reset();  // a diffusion generation still running ends here (its states are released below)
  s.uncond.reset();
  // Choices not yet forked (queued, or cancelled / failed during the prefill) end with it.
  for (auto& f : s.forks) finish(*f, r, error);
  s.forks.clear();
  StreamEvent ev;
  ev.index = s.index;
  ev.done = true;
  if ((r == FinishReason::kStop || r == FinishReason::kLength) && !s.stop_hit) {
    bool stopped = false;
    ev.text = s.text->flush(&stopped);
    s.out_text += ev.text;
    if (stopped) r = FinishReason::kStop;
  }
  ev.finish = r;
  ev.error = error;
  ev.usage = {s.n_prompt, s.n_generated, s.n_cached};
  // Counted before the final event is published: a client that reads
  // /metrics right after its response must see its own request.
  if (metrics_) {
    metrics_->count_finish(finish_reason_name(r));
    metrics_->add_generated_tokens(s.n_generated);
    metrics_->observe_e2e(now_seconds() - s.t_submit);
  }
  s.ch->push(std::move(ev));
  if (s.state) {
    if (r == FinishReason::kStop || r == FinishReason::kLength)
      snapshot_turn(s);
    else if (r != FinishReason::kError)
      snapshot_into_cache(s);
    release_state(std::move(s.state), s.reserved);
  }
}

// Diffusion requests: each is a runtime::DiffusionJob; one iteration runs the
// next denoising step of every running request as ONE forward over all their
// canvas slices (models::diffusion_forward_batch: weights streamed once, each
// slice's logits bit-identical to running it alone), then each job commits
// its step and emits the blocks it completed.
bool Engine::start_diffusion(Sequence& s) {
  runtime::GenerateOptions go;
  go.n_predict = s.p.max_tokens;
  go.stop_at_eog = !s.p.ignore_eos;
  go.sampling = s.p.sampling;
  go.diffusion = s.p.diffusion;
  go.diffusion.visual = false;  // `serve --visual` is refused (cmd_serve.cpp)
  auto state_for = [this, &s](int branch, int64_t positions) {
    if (branch == 0) return s.state.get();  // n_ctx positions, reserved at admission
    s.uncond = ctx_.new_state(positions);
    return s.uncond.get();
  };
  auto job = runtime::DiffusionJob::start(model_, {}, s.p.prompt, go, opts_.n_ctx, state_for);
  if (!job) {
    finish(s, FinishReason::kError, job.status().message());
    return false;
  }
  s.djob = std::move(*job);
  if (s.djob->finished()) {
    finish(s, FinishReason::kLength);
    return false;
  }
  return true;
}

void Engine::step_diffusion() {
  std::vector<Sequence*> active;
  std::vector<models::DiffusionSlice> slices;
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (s.done || (!s.djob && !start_diffusion(s))) continue;
    const auto sl = s.djob->slices();
    slices.insert(slices.end(), sl.begin(), sl.end());
    active.push_back(&s);
  }
  if (active.empty()) return;
  if (Status st = models::diffusion_forward_batch(ctx_, slices, pool_); st) {
    if (metrics_) metrics_->add_diffusion_forward((int64_t)active.size());
  } else {
    // A bad slice fails the whole batch before anything runs: run the
    // requests alone so only the faulty ones end (with their error).
    for (Sequence* s : active) {
      Status one = models::diffusion_forward_batch(ctx_, s->djob->slices(), pool_);
      if (!one) finish(*s, FinishReason::kError, one.message());
      else if (metrics_) metrics_->add_diffusion_forward(1);
    }
  }
  for (Sequence* sp : active) {
    Sequence& s = *sp;
    if (s.done) continue;
    s.djob->commit();
    s.djob->seek([this, &s](int32_t tok) {
      publish_token(s, tok);
      return !s.stop_hit && !s.ch->cancelled();
    });
    if (!s.djob->finished()) continue;
    if (s.ch->cancelled()) {
      finish(s, FinishReason::kCancelled);
    } else {
      finish(s, s.stop_hit || s.djob->stats().stopped_at_eog ? FinishReason::kStop : FinishReason::kLength);
    }
  }
}

}  // namespace chimera::server
