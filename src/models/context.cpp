// Context: forward validation, the per-context scratch and KV cache types.
#include "models/context.h"

#include <string>

namespace chimera::models {

Context::Context(const Model& m) : model_(&m), scratch_(m.new_scratch()), kv_types_(m.default_kv_types()) {}
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;
Context::~Context() = default;

Status Context::set_kv_types(layers::KvCacheTypes t) {
  CHIMERA_RETURN_IF_ERROR(model_->check_kv_types(t));
  kv_types_ = t;
  return Status::ok();
}

std::unique_ptr<layers::SequenceState> Context::new_state(int64_t n_ctx) const {
  return model_->new_state(n_ctx, kv_types_);
}

Context Context::fresh() const {
  Context c(*model_);
  c.kv_types_ = kv_types_;
  return c;
}

Status Context::forward(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which, float* logits,
                        ThreadPool* pool) {
  const int64_t n_vocab = model_->info().n_vocab;
  if (n <= 0) return invalid_argument("forward: no tokens");
  if (st.n_past() + n > st.n_ctx())
    return out_of_range("context overflow: " + std::to_string(st.n_past()) + " tokens in context + " +
                        std::to_string(n) + " new exceed the context size " + std::to_string(st.n_ctx()) +
                        " (raise it with -c)");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      return invalid_argument("token id " + std::to_string(tokens[i]) + " is out of range [0, " +
                              std::to_string(n_vocab) + ")");
  model_->forward_impl(*scratch_, st, tokens, n, which, logits, pool);
  return Status::ok();
}

Status Context::forward_batch(std::span<BatchItem> items, ThreadPool* pool) {
  const int64_t n_vocab = model_->info().n_vocab;
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& it = items[i];
    const std::string where = "forward_batch item " + std::to_string(i) + ": ";
    if (!it.state) return invalid_argument(where + "no state");
    if (it.n <= 0) return invalid_argument(where + "no tokens");
    if (it.which != Logits::kNone && !it.logits) return invalid_argument(where + "logits requested without a buffer");
    for (size_t j = 0; j < i; ++j)
      if (items[j].state == it.state) return invalid_argument(where + "the same state appears twice");
    const layers::SequenceState& st = *it.state;
    if (st.n_past() + it.n > st.n_ctx())
      return out_of_range(where + "context overflow: " + std::to_string(st.n_past()) + " tokens in context + " +
                          std::to_string(it.n) + " new exceed the context size " + std::to_string(st.n_ctx()));
    for (int64_t k = 0; k < it.n; ++k)
      if (it.tokens[k] < 0 || it.tokens[k] >= n_vocab)
        return invalid_argument(where + "token id " + std::to_string(it.tokens[k]) + " is out of range [0, " +
                                std::to_string(n_vocab) + ")");
  }
  if (!items.empty()) model_->forward_batch_impl(*scratch_, items, pool);
  return Status::ok();
}

}  // namespace chimera::models
