// Samplers: the runtime's Sampler chain (the CLI's) plus an optional grammar.
#include <cmath>

#include "capi/capi_internal.h"
#include "runtime/grammar/constrained_sampling.h"

using namespace chimera;
using namespace chimera::capi;

namespace chimera::capi {
namespace {

chimera_status check_range(ErrorSlot* slot, const char* name, double v, double lo, double hi) {
  if (std::isnan(v) || v < lo || v > hi)
    return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT,
                std::string("sampling.") + name + " must be between " + std::to_string(lo) + " and " +
                    std::to_string(hi) + ", got " + std::to_string(v));
  return CHIMERA_OK;
}

}  // namespace

chimera_status make_sampling(chimera_model* m, const chimera_sampling_params& p, ErrorSlot* slot,
                             runtime::SamplingParams* out, std::shared_ptr<runtime::grammar::CompiledGrammar>* grammar) {
  if (p.struct_size != sizeof p)
    return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT,
                "sampling.struct_size is " + std::to_string(p.struct_size) + ", this library expects " +
                    std::to_string(sizeof p) + " (chimera_sampling_params_init)");
  // The CLI's ranges (cli/common.cpp SamplingOptions).
  chimera_status s = CHIMERA_OK;
  if ((s = check_range(slot, "temperature", p.temperature, 0, 100)) || (s = check_range(slot, "top_k", p.top_k, 0, 1 << 30)) ||
      (s = check_range(slot, "top_p", p.top_p, 0, 1)) || (s = check_range(slot, "min_p", p.min_p, 0, 1)) ||
      (s = check_range(slot, "repeat_penalty", p.repeat_penalty, 1e-6, 100)) ||
      (s = check_range(slot, "presence_penalty", p.presence_penalty, -100, 100)) ||
      (s = check_range(slot, "frequency_penalty", p.frequency_penalty, -100, 100)) ||
      (s = check_range(slot, "penalty_last_n", p.penalty_last_n, -1, 1 << 30)))
    return s;
  out->temperature = p.temperature;
  out->top_k = p.top_k;
  out->top_p = p.top_p;
  out->min_p = p.min_p;
  out->repeat_penalty = p.repeat_penalty;
  out->presence_penalty = p.presence_penalty;
  out->frequency_penalty = p.frequency_penalty;
  out->penalty_last_n = p.penalty_last_n;
  out->seed = p.seed;
  grammar->reset();
  if (p.grammar && p.json_schema)
    return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, "give at most one of sampling.grammar and sampling.json_schema");
  if (!p.grammar && !p.json_schema) return CHIMERA_OK;
  if (m->model->info().is_diffusion)
    return fail(slot, CHIMERA_ERR_UNSUPPORTED, "grammars need an autoregressive model");
  runtime::grammar::GrammarSource src;
  src.kind = p.grammar ? runtime::grammar::GrammarSource::Kind::kGbnf : runtime::grammar::GrammarSource::Kind::kJsonSchema;
  src.text = p.grammar ? p.grammar : p.json_schema;
  auto g = runtime::grammar::CompiledGrammar::compile(src, m->grammar_vocab());
  if (!g) return fail(slot, g.status().with_context(p.grammar ? "sampling.grammar" : "sampling.json_schema"));
  *grammar = std::move(g).value();
  return CHIMERA_OK;
}

}  // namespace chimera::capi

extern "C" {

void chimera_sampling_params_init(chimera_sampling_params* p) {
  if (!p) return;
  *p = chimera_sampling_params{};
  p->struct_size = sizeof *p;
  const runtime::SamplingParams d;  // the CLI's defaults
  p->temperature = d.temperature;
  p->top_k = d.top_k;
  p->top_p = d.top_p;
  p->min_p = d.min_p;
  p->repeat_penalty = d.repeat_penalty;
  p->presence_penalty = d.presence_penalty;
  p->frequency_penalty = d.frequency_penalty;
  p->penalty_last_n = d.penalty_last_n;
  p->seed = d.seed;
}

chimera_status chimera_sampler_create(chimera_model* m, const chimera_sampling_params* params, chimera_sampler** out) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (!out) return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT, "the output sampler pointer is NULL");
    *out = nullptr;
    chimera_sampling_params p;
    if (chimera_status s = read_struct(params, chimera_sampling_params_init, "chimera_sampling_params", &m->err, &p))
      return s;
    runtime::SamplingParams sp;
    std::shared_ptr<runtime::grammar::CompiledGrammar> g;
    if (chimera_status s = make_sampling(m, p, &m->err, &sp, &g)) return s;
    auto smp = std::make_unique<chimera_sampler>();
    smp->owner = m;
    smp->sampler.emplace(sp);
    if (g) smp->matcher.emplace(g);
    ++m->children;
    *out = smp.release();
    return CHIMERA_OK;
  });
}

void chimera_sampler_free(chimera_sampler* s) {
  if (!s) return;
  --s->owner->children;
  delete s;
}

const char* chimera_sampler_last_error(const chimera_sampler* s) { return s ? s->err.get() : "sampler is NULL"; }

chimera_status chimera_sampler_accept(chimera_sampler* s, const int32_t* tokens, size_t n_tokens) {
  if (!s) return null_handle("sampler");
  return guarded(&s->err, [&]() -> chimera_status {
    if (!tokens && n_tokens > 0) return fail(&s->err, CHIMERA_ERR_INVALID_ARGUMENT, "tokens is NULL");
    for (size_t i = 0; i < n_tokens; ++i)
      if (!s->owner->tok().valid_id(tokens[i]))
        return fail(&s->err, CHIMERA_ERR_INVALID_ARGUMENT,
                    "tokens[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) + " is outside the vocabulary");
    for (size_t i = 0; i < n_tokens; ++i) s->sampler->accept(tokens[i]);
    return CHIMERA_OK;
  });
}

chimera_status chimera_sampler_reset(chimera_sampler* s) {
  if (!s) return null_handle("sampler");
  s->sampler->reset();
  if (s->matcher) s->matcher->reset();
  return CHIMERA_OK;
}

chimera_status chimera_sampler_sample(chimera_sampler* s, chimera_context* ctx, int32_t* token) {
  if (!s) return null_handle("sampler");
  if (!ctx) return fail(&s->err, CHIMERA_ERR_INVALID_ARGUMENT, "context is NULL");
  if (!token) return fail(&s->err, CHIMERA_ERR_INVALID_ARGUMENT, "token is NULL");
  if (ctx->owner != s->owner)
    return fail(&s->err, CHIMERA_ERR_INVALID_ARGUMENT, "the context belongs to another model than the sampler");
  BusyGuard busy(ctx);
  if (!busy.ok()) return fail(&s->err, CHIMERA_ERR_BUSY, "the context is in use by a running call (its own callback?)");
  return guarded(&s->err, [&]() -> chimera_status {
    if (!ctx->ar) return fail(&s->err, CHIMERA_ERR_UNSUPPORTED, "chimera_sampler_sample needs an autoregressive model");
    {
      std::lock_guard<std::mutex> lk(ctx->owner->run_mu);
      if (Status st = ctx->ar->feed(nullptr, 0, nullptr); !st) return fail(&s->err, st);  // a pending token
    }
    const runtime::SequenceSession& sess = ctx->ar->session();
    if (!sess.have_logits)
      return fail(&s->err, CHIMERA_ERR_INVALID_ARGUMENT, "the context holds no tokens yet (decode a prompt first)");
    const int32_t nv = s->owner->n_vocab();
    int32_t t;
    if (s->matcher) {
      auto r = runtime::grammar::sample_constrained(*s->sampler, *s->matcher, sess.logits.data(), nv, s->scratch);
      if (!r) return fail(&s->err, r.status());
      t = *r;
    } else {
      t = s->sampler->sample(sess.logits.data(), nv);
    }
    if (t >= 0) s->sampler->accept(t);
    *token = t;
    return CHIMERA_OK;
  });
}

}  // extern "C"
