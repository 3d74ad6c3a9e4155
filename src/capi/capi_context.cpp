// Contexts (one sequence each on a shared model): create, reset, decode with
// logits, and saved states. A context is the runtime's Generator for the
// model (the CLI's and the server's generation code), on a models::Context of
// its own; forwards of one model's contexts are serialized by the model's
// run_mu because they share its thread pool.
#include "capi/capi_internal.h"
#include "runtime/session_io.h"

using namespace chimera;
using namespace chimera::capi;

namespace chimera::capi {

chimera_status need_autoregressive(chimera_context* ctx, const char* what) {
  if (!ctx->ar)
    return fail(&ctx->err, CHIMERA_ERR_UNSUPPORTED,
                std::string(what) + " needs an autoregressive model; '" + ctx->owner->model->info().arch +
                    "' is a diffusion model (use chimera_generate)");
  return CHIMERA_OK;
}

}  // namespace chimera::capi

extern "C" {

void chimera_context_params_init(chimera_context_params* p) {
  if (!p) return;
  *p = chimera_context_params{};
  p->struct_size = sizeof *p;
}

chimera_status chimera_context_create(chimera_model* m, const chimera_context_params* params, chimera_context** out) {
  if (!m) return null_handle("model");
  return guarded(&m->err, [&]() -> chimera_status {
    if (!out) return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT, "the output context pointer is NULL");
    *out = nullptr;
    chimera_context_params p;
    if (chimera_status s = read_struct(params, chimera_context_params_init, "chimera_context_params", &m->err, &p))
      return s;
    if (p.n_ctx < 0 || p.n_ctx > ((int64_t)1 << 24))
      return fail(&m->err, CHIMERA_ERR_INVALID_ARGUMENT,
                  "n_ctx must be between 0 (the model's default) and 16777216, got " + std::to_string(p.n_ctx));
    auto c = std::make_unique<chimera_context>();
    c->owner = m;
    c->gen = runtime::make_generator(*m->model, p.n_ctx > 0 ? p.n_ctx : m->n_ctx, m->pool.get());
    c->ar = dynamic_cast<runtime::AutoregressiveGenerator*>(c->gen.get());
    ++m->children;
    *out = c.release();
    return CHIMERA_OK;
  });
}

void chimera_context_free(chimera_context* ctx) {
  if (!ctx) return;
  --ctx->owner->children;
  delete ctx;
}

const char* chimera_context_last_error(const chimera_context* ctx) { return ctx ? ctx->err.get() : "context is NULL"; }

chimera_status chimera_context_reset(chimera_context* ctx) {
  if (!ctx) return null_handle("context");
  BusyGuard busy(ctx);
  if (!busy.ok()) return busy.refuse();
  return guarded(&ctx->err, [&]() -> chimera_status {
    ctx->gen->reset();
    return CHIMERA_OK;
  });
}

chimera_status chimera_context_size(const chimera_context* cctx, int64_t* n_past, int64_t* n_ctx) {
  if (!cctx) return null_handle("context");
  auto* ctx = const_cast<chimera_context*>(cctx);
  BusyGuard busy(ctx);
  if (!busy.ok()) return busy.refuse();
  if (n_past) *n_past = ctx->gen->n_past();
  if (n_ctx) *n_ctx = ctx->gen->n_ctx();
  return CHIMERA_OK;
}

chimera_status chimera_decode(chimera_context* ctx, const int32_t* tokens, size_t n_tokens, int mode,
                              float* logits, size_t capacity) {
  if (!ctx) return null_handle("context");
  BusyGuard busy(ctx);
  if (!busy.ok()) return busy.refuse();
  return guarded(&ctx->err, [&]() -> chimera_status {
    if (chimera_status s = need_autoregressive(ctx, "chimera_decode")) return s;
    if (n_tokens == 0) return fail(&ctx->err, CHIMERA_ERR_INVALID_ARGUMENT, "no tokens to decode");
    if (!tokens) return fail(&ctx->err, CHIMERA_ERR_INVALID_ARGUMENT, "tokens is NULL");
    const size_t nv = (size_t)ctx->owner->n_vocab();
    size_t rows = 0;
    switch (mode) {
      case CHIMERA_LOGITS_NONE: rows = 0; break;
      case CHIMERA_LOGITS_LAST: rows = 1; break;
      case CHIMERA_LOGITS_ALL: rows = n_tokens; break;
      default:
        return fail(&ctx->err, CHIMERA_ERR_INVALID_ARGUMENT, "unknown logits mode " + std::to_string(mode));
    }
    if (rows > 0 && (!logits || capacity < rows * nv))
      return fail(&ctx->err, logits ? CHIMERA_ERR_BUFFER_TOO_SMALL : CHIMERA_ERR_INVALID_ARGUMENT,
                  "the logits buffer must hold " + std::to_string(rows) + " x " + std::to_string(nv) + " floats (" +
                      (logits ? "capacity " + std::to_string(capacity) : std::string("it is NULL")) + ")");
    std::lock_guard<std::mutex> lk(ctx->owner->run_mu);
    Status s = ctx->ar->feed(tokens, (int64_t)n_tokens, mode == CHIMERA_LOGITS_ALL ? logits : nullptr);
    if (!s) return fail(&ctx->err, s);
    if (mode == CHIMERA_LOGITS_LAST) {
      const std::vector<float>& last = ctx->ar->session().logits;
      std::copy(last.begin(), last.end(), logits);
    }
    return CHIMERA_OK;
  });
}

chimera_status chimera_state_save(chimera_context* ctx, uint8_t* data, size_t capacity, size_t* n_bytes) {
  if (!ctx) return null_handle("context");
  BusyGuard busy(ctx);
  if (!busy.ok()) return busy.refuse();
  return guarded(&ctx->err, [&]() -> chimera_status {
    if (chimera_status s = need_autoregressive(ctx, "chimera_state_save")) return s;
    const models::Model& model = *ctx->owner->model;
    const runtime::SequenceSession& sess = ctx->ar->session();
    const size_t need = runtime::session_bytes(model, sess);
    if (chimera_status s = check_capacity(&ctx->err, data, capacity, need, n_bytes, "the saved state (bytes)")) return s;
    if (Status s = runtime::save_session(model, sess, std::span<uint8_t>(data, capacity)); !s) return fail(&ctx->err, s);
    return CHIMERA_OK;
  });
}

chimera_status chimera_state_load(chimera_context* ctx, const uint8_t* data, size_t n_bytes) {
  if (!ctx) return null_handle("context");
  BusyGuard busy(ctx);
  if (!busy.ok()) return busy.refuse();
  return guarded(&ctx->err, [&]() -> chimera_status {
    if (chimera_status s = need_autoregressive(ctx, "chimera_state_load")) return s;
    if (!data && n_bytes > 0) return fail(&ctx->err, CHIMERA_ERR_INVALID_ARGUMENT, "data is NULL");
    Status s = runtime::load_session(*ctx->owner->model, std::span<const uint8_t>(data ? data : (const uint8_t*)"", n_bytes),
                                     &ctx->ar->session());
    if (!s) return fail(&ctx->err, s);
    return CHIMERA_OK;
  });
}

}  // extern "C"
