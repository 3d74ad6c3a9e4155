// Models: load (threads, instruction set, default context), info, free.
#include <filesystem>

#include "capi/capi_internal.h"
#include "core/cpu_features.h"
#include "kernels/dispatch.h"

namespace chimera::capi {
namespace {

// The instruction-set override is process-wide (kernels::set_active_isa) and
// weights are repacked for it at load, so it may change only while no model
// is loaded.
std::mutex g_isa_mu;
int g_live_models = 0;

chimera_status apply_isa(const char* isa) {
  if (!isa) return CHIMERA_OK;
  kernels::Isa want;
  if (!kernels::parse_isa(isa, &want))
    return fail(nullptr, CHIMERA_ERR_INVALID_ARGUMENT,
                std::string("unknown instruction set '") + isa + "' (scalar, avx2, avx2vnni, avx512, avx512vnni, amx, neon)");
  bool ok = false;
  for (auto a : kernels::available_isas()) ok |= a == want;
  if (!ok)
    return fail(nullptr, CHIMERA_ERR_UNSUPPORTED, std::string("this CPU cannot run ") + kernels::isa_name(want) + " kernels");
  if (kernels::active_isa() == want) return CHIMERA_OK;
  if (g_live_models > 0)
    return fail(nullptr, CHIMERA_ERR_UNSUPPORTED,
                std::string("the instruction set is process-wide and loaded models use ") +
                    kernels::isa_name(kernels::active_isa()) + "; free them before loading with isa '" + isa + "'");
  kernels::set_active_isa(want);
  return CHIMERA_OK;
}

}  // namespace
}  // namespace chimera::capi

std::shared_ptr<const chimera::runtime::grammar::TokenVocab> chimera_model::grammar_vocab() {
  std::call_once(vocab_once, [&] { vocab = chimera::runtime::grammar::TokenVocab::from_tokenizer(tok()); });
  return vocab;
}

using namespace chimera;
using namespace chimera::capi;

extern "C" {

void chimera_model_params_init(chimera_model_params* p) {
  if (!p) return;
  *p = chimera_model_params{};
  p->struct_size = sizeof *p;
}

chimera_status chimera_model_load(const char* path, const chimera_model_params* params, chimera_model** out) {
  return guarded(nullptr, [&]() -> chimera_status {
    if (!out) return null_handle("the output model pointer");
    *out = nullptr;
    if (!path) return null_handle("path");
    chimera_model_params p;
    if (chimera_status s = read_struct(params, chimera_model_params_init, "chimera_model_params", nullptr, &p))
      return s;
    if (p.n_threads < 0 || p.n_threads > 1024)
      return fail(nullptr, CHIMERA_ERR_INVALID_ARGUMENT,
                  "n_threads must be between 0 (one per core) and 1024, got " + std::to_string(p.n_threads));
    if (p.n_ctx < 0 || p.n_ctx > ((int64_t)1 << 24))
      return fail(nullptr, CHIMERA_ERR_INVALID_ARGUMENT,
                  "n_ctx must be between 0 (4096) and 16777216, got " + std::to_string(p.n_ctx));
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      return fail(nullptr, CHIMERA_ERR_INVALID_ARGUMENT, std::string("'") + path + "' is a directory, not a GGUF file");

    std::lock_guard<std::mutex> lk(g_isa_mu);  // the ISA must not change while this model repacks its weights
    if (chimera_status s = apply_isa(p.isa)) return s;
    auto m = std::make_unique<chimera_model>();
    auto loaded = models::load_model(path);
    if (!loaded) return fail(nullptr, loaded.status().with_context(std::string("loading '") + path + "'"));
    m->model = std::move(loaded).value();
    m->pool = std::make_unique<ThreadPool>(p.n_threads > 0 ? p.n_threads : default_thread_count());
    m->n_ctx = p.n_ctx > 0 ? p.n_ctx : 4096;
    m->isa = kernels::isa_name(kernels::active_isa());
    m->template_source = m->model->gguf().get_string("tokenizer.chat_template");
    if (m->template_source) {
      auto parsed = tokenizer::ChatTemplate::parse(*m->template_source);
      if (parsed)
        m->tmpl = std::move(parsed).value();
      else
        m->template_error = parsed.status().with_context("the model's chat template cannot be used");
    } else {
      m->tmpl = tokenizer::ChatTemplate::fallback();
    }
    ++g_live_models;
    *out = m.release();
    return CHIMERA_OK;
  });
}

chimera_status chimera_model_free(chimera_model* m) {
  if (!m) return CHIMERA_OK;
  if (int n = m->children.load(); n > 0)
    return fail(&m->err, CHIMERA_ERR_BUSY,
                std::to_string(n) + " contexts or samplers of this model are still alive; free them first");
  {
    std::lock_guard<std::mutex> lk(g_isa_mu);
    --g_live_models;
  }
  delete m;
  return CHIMERA_OK;
}

const char* chimera_model_last_error(const chimera_model* m) { return m ? m->err.get() : "model is NULL"; }

chimera_status chimera_model_info_get(const chimera_model* m, chimera_model_info* out) {
  if (!m) return null_handle("model");
  ErrorSlot* slot = const_cast<ErrorSlot*>(&m->err);
  return guarded(slot, [&]() -> chimera_status {
    if (chimera_status s = check_out_struct(out, "info", slot)) return s;
    const models::ModelInfo& i = m->model->info();
    const tokenizer::Tokenizer& tok = m->tok();
    out->arch = i.arch.c_str();
    out->name = i.name.c_str();
    out->chat_template = m->template_source ? m->template_source->c_str() : nullptr;
    out->isa = m->isa;
    out->n_vocab = (int32_t)i.n_vocab;
    out->token_bos = tok.bos();
    out->token_eos = tok.eos();
    out->is_diffusion = i.is_diffusion ? 1 : 0;
    out->n_ctx_train = i.n_ctx_train;
    out->n_ctx = m->n_ctx;
    out->n_embd = i.n_embd;
    out->n_layer = i.n_layer;
    return CHIMERA_OK;
  });
}

}  // extern "C"
