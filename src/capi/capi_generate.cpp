// chimera_generate: the runtime Generator's loop (the CLI's `run`) with the
// server's stop-string text stream, a per-token callback and cancellation.
// The model lock is held while computing and released around each callback.
#include "capi/capi_internal.h"
#include "runtime/text_stream.h"

using namespace chimera;
using namespace chimera::capi;

extern "C" {

void chimera_generate_params_init(chimera_generate_params* p) {
  if (!p) return;
  *p = chimera_generate_params{};
  p->struct_size = sizeof *p;
  p->max_tokens = 128;
  chimera_sampling_params_init(&p->sampling);
}

chimera_status chimera_context_cancel(chimera_context* ctx) {
  if (!ctx) return null_handle("context");
  ctx->cancel.store(true);
  return CHIMERA_OK;
}

chimera_status chimera_generate(chimera_context* ctx, const int32_t* prompt, size_t n_prompt,
                                const chimera_generate_params* params, chimera_generate_result* result) {
  if (!ctx) return null_handle("context");
  BusyGuard busy(ctx);
  if (!busy.ok()) return busy.refuse();
  ErrorSlot* slot = &ctx->err;
  return guarded(slot, [&]() -> chimera_status {
    chimera_generate_params p;
    if (chimera_status s = read_struct(params, chimera_generate_params_init, "chimera_generate_params", slot, &p))
      return s;
    if (result)
      if (chimera_status s = check_out_struct(result, "result", slot)) return s;
    if (!prompt && n_prompt > 0) return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, "prompt is NULL");
    chimera_model* m = ctx->owner;
    runtime::GenerateOptions go;
    std::shared_ptr<runtime::grammar::CompiledGrammar> g;
    if (chimera_status s = make_sampling(m, p.sampling, slot, &go.sampling, &g)) return s;
    std::optional<runtime::grammar::GrammarMatcher> matcher;
    if (g) go.grammar = &matcher.emplace(g);
    go.n_predict = p.max_tokens;
    go.stop_at_eog = p.ignore_eos == 0;
    std::vector<std::string> stops;
    if (p.n_stop > 0 && !p.stop) return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, "stop is NULL with n_stop > 0");
    for (size_t i = 0; i < p.n_stop; ++i) {
      if (!p.stop[i] || !*p.stop[i])
        return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, "stop[" + std::to_string(i) + "] is NULL or empty");
      stops.emplace_back(p.stop[i]);
    }
    const std::vector<int32_t> ids(prompt, prompt + n_prompt);

    runtime::TextStream text(m->tok(), std::move(stops), /*render_special=*/false);
    bool stop_hit = false, cancelled = false;
    std::unique_lock<std::mutex> lk(m->run_mu);
    ctx->cancel.store(false);
    auto r = ctx->gen->generate(ids, go, [&](int32_t t) {
      const std::string piece = text.push(t, &stop_hit);
      if (p.callback) {
        lk.unlock();
        const int rc = p.callback(t, piece.data(), piece.size(), p.user_data);
        lk.lock();
        if (rc != 0) cancelled = true;
      }
      if (ctx->cancel.load()) cancelled = true;
      return !cancelled && !stop_hit;
    });
    lk.unlock();
    if (!r) return fail(slot, r.status());
    if (!stop_hit) {
      const std::string rest = text.flush(&stop_hit);
      if (!rest.empty() && p.callback) p.callback(-1, rest.data(), rest.size(), p.user_data);
    }
    if (result) {
      result->n_prompt = r->n_prompt;
      result->n_generated = r->n_generated;
      result->finish_reason = stop_hit || r->stopped_at_eog || r->grammar_complete ? CHIMERA_FINISH_STOP
                              : cancelled                                          ? CHIMERA_FINISH_CANCELLED
                              : r->hit_context_limit                               ? CHIMERA_FINISH_CONTEXT_FULL
                                                                                   : CHIMERA_FINISH_LENGTH;
    }
    return CHIMERA_OK;
  });
}

}  // extern "C"
