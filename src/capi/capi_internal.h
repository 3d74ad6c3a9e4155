// The C API's handle types and the glue every entry point shares: status
// mapping, per-handle error messages, exception containment, struct-size
// checks and the busy flag that refuses re-entrant calls on a context.
// Only src/capi/*.cpp include this; include/chimera.h is the public face.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "chimera.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "models/model.h"
#include "runtime/generator.h"
#include "runtime/grammar/grammar_constraint.h"
#include "runtime/sampler.h"
#include "tokenizer/chat_template.h"

namespace chimera::capi {

// The message of each thread's most recent failed call on one handle.
class ErrorSlot {
 public:
  void set(const std::string& msg);
  const char* get() const;  // "" when this thread has had no failure here

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::thread::id, std::string> by_thread_;  // node-based: c_str() stays put
};

// Records msg in slot (may be null) and in the thread's last error; returns code.
chimera_status fail(ErrorSlot* slot, chimera_status code, const std::string& msg);
chimera_status fail(ErrorSlot* slot, const Status& s);
chimera_status null_handle(const char* what);
const char* last_error_text();  // the thread's last message

// Runs body (returning chimera_status); exceptions become error statuses.
template <class F>
chimera_status guarded(ErrorSlot* slot, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(slot, CHIMERA_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(slot, CHIMERA_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(slot, CHIMERA_ERR_INTERNAL, "internal error (unknown exception)");
  }
}

// *out = *in (defaults when in is null), after checking in->struct_size.
template <class T>
chimera_status read_struct(const T* in, void (*init)(T*), const char* name, ErrorSlot* slot, T* out) {
  init(out);
  if (!in) return CHIMERA_OK;
  if (in->struct_size != sizeof(T))
    return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT,
                std::string(name) + ".struct_size is " + std::to_string(in->struct_size) + ", this library expects " +
                    std::to_string(sizeof(T)) + " (initialise it with the matching *_init function)");
  *out = *in;
  return CHIMERA_OK;
}

// An output struct's struct_size check.
template <class T>
chimera_status check_out_struct(const T* out, const char* name, ErrorSlot* slot) {
  if (!out) return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
  if (out->struct_size != sizeof(T))
    return fail(slot, CHIMERA_ERR_INVALID_ARGUMENT,
                std::string(name) + "->struct_size is " + std::to_string(out->struct_size) +
                    ", this library expects " + std::to_string(sizeof(T)));
  return CHIMERA_OK;
}

// Checks (buffer, capacity) for `need` items: BUFFER_TOO_SMALL (with *n_out
// = need) when it does not fit.
chimera_status check_capacity(ErrorSlot* slot, const void* buf, size_t capacity, size_t need, size_t* n_out,
                              const char* what);

}  // namespace chimera::capi

struct chimera_model {
  std::unique_ptr<chimera::models::Model> model;
  std::unique_ptr<chimera::ThreadPool> pool;
  std::mutex run_mu;  // one forward at a time: the thread pool is shared (each context has its own scratch)
  int64_t n_ctx = 4096;
  const char* isa = "";  // kernels::isa_name of the instruction set its weights were prepared for
  std::optional<std::string> template_source;                 // tokenizer.chat_template
  std::optional<chimera::tokenizer::ChatTemplate> tmpl;       // parsed (fallback when none)
  chimera::Status template_error;                             // why the model's template is unusable
  std::once_flag vocab_once;                                  // grammar vocabulary, built on first use
  std::shared_ptr<const chimera::runtime::grammar::TokenVocab> vocab;
  std::atomic<int> children{0};                               // live contexts and samplers
  chimera::capi::ErrorSlot err;

  const chimera::tokenizer::Tokenizer& tok() const { return model->tokenizer(); }
  int32_t n_vocab() const { return (int32_t)model->info().n_vocab; }
  std::shared_ptr<const chimera::runtime::grammar::TokenVocab> grammar_vocab();
};

struct chimera_context {
  chimera_model* owner = nullptr;
  std::unique_ptr<chimera::runtime::Generator> gen;  // owns the context's models::Context (scratch, states)
  chimera::runtime::AutoregressiveGenerator* ar = nullptr;  // gen, when the model is autoregressive
  std::atomic<bool> busy{false};    // a call is running (a callback calling back in is refused)
  std::atomic<bool> cancel{false};  // chimera_context_cancel
  chimera::capi::ErrorSlot err;
};

struct chimera_sampler {
  chimera_model* owner = nullptr;
  std::optional<chimera::runtime::Sampler> sampler;
  std::optional<chimera::runtime::grammar::GrammarMatcher> matcher;
  std::vector<uint64_t> scratch;  // grammar mask
  chimera::capi::ErrorSlot err;
};

namespace chimera::capi {

// Marks ctx busy for the lifetime of the guard; ok() false when it already was.
class BusyGuard {
 public:
  explicit BusyGuard(chimera_context* c) : c_(c), ok_(!c->busy.exchange(true)) {}
  ~BusyGuard() {
    if (ok_) c_->busy.store(false);
  }
  bool ok() const { return ok_; }
  chimera_status refuse() const {
    return fail(&c_->err, CHIMERA_ERR_BUSY, "the context is in use by a running call (its own callback?)");
  }

 private:
  chimera_context* c_;
  bool ok_;
};

// The autoregressive generator of ctx, or an UNSUPPORTED error naming `what`.
chimera_status need_autoregressive(chimera_context* ctx, const char* what);
// Validates sampling parameters (the CLI's ranges) and compiles the grammar, if any.
chimera_status make_sampling(chimera_model* m, const chimera_sampling_params& p, ErrorSlot* slot,
                             runtime::SamplingParams* out,
                             std::shared_ptr<runtime::grammar::CompiledGrammar>* grammar);

}  // namespace chimera::capi
