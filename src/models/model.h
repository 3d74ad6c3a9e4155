// The model interface every family implements, and the loader entry point.
// A model owns its GGUF mapping, bound weights, tokenizer and scratch space.
// forward() processes any number of tokens of one sequence at the positions
// that follow the state's n_past(), advancing the state; batched prefill,
// chunked prefill and single-token decode are the same call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "layers/state.h"
#include "tokenizer/tokenizer.h"

namespace chimera::models {

struct ModelInfo {
  std::string arch;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ctx_train = 0;
  bool is_diffusion = false;
  uint64_t weight_bytes = 0;   // bytes of all tensor data
  // Weight bytes one decoded token reads: everything except the unused rows of
  // an untied embedding table and the experts a token does not route to
  // (expert tensors × used / total). The decode-bandwidth figure uses this.
  uint64_t decode_bytes_per_token = 0;
};

enum class Logits {
  kNone,  // no logits (prefill of a prefix)
  kLast,  // one row: the last token
  kAll,   // one row per token
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelInfo& info() const { return info_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tok_; }
  const format::GgufFile& gguf() const { return *gguf_; }

  // What each layer keeps per sequence.
  virtual std::vector<layers::LayerStateSpec> state_specs() const = 0;
  std::unique_ptr<layers::SequenceState> new_state(int64_t n_ctx) const {
    return std::make_unique<layers::SequenceState>(state_specs(), n_ctx);
  }

  // Runs tokens[0..n) at positions st.n_past().. and advances st. Writes
  // logits rows of n_vocab floats as `which` asks. Context overflow and bad
  // token ids are errors (the state is left unchanged).
  Status forward(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which, float* logits,
                 ThreadPool* pool);

 protected:
  // Family implementation: tokens already validated, n >= 1, fits in context.
  virtual void forward_impl(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which,
                            float* logits, ThreadPool* pool) = 0;

  ModelInfo info_;
  std::unique_ptr<format::GgufFile> gguf_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  friend Result<std::unique_ptr<Model>> load_model(const std::string& path);
};

// Base for families whose forward pass runs any number of rows per layer: it
// splits a call into micro-batches of at most kMaxUbatch rows (bounding the
// scratch a family preallocates) and hands each to ubatch(). row0 is the
// micro-batch's first row within the call; last is true for the final one.
class MicroBatchedModel : public Model {
 public:
  static constexpr int64_t kMaxUbatch = 256;

 protected:
  void forward_impl(layers::SequenceState& st, const int32_t* tokens, int64_t n, Logits which, float* logits,
                    ThreadPool* pool) final {
    for (int64_t done = 0; done < n; done += kMaxUbatch) {
      const int64_t T = n - done < kMaxUbatch ? n - done : kMaxUbatch;
      ubatch(st, tokens + done, T, which, logits, done, done + T == n, pool);
    }
  }
  virtual void ubatch(layers::SequenceState& st, const int32_t* tokens, int64_t T, Logits which, float* logits,
                      int64_t row0, bool last, ThreadPool* pool) = 0;
};

// Opens a GGUF file and builds the model for its general.architecture.
Result<std::unique_ptr<Model>> load_model(const std::string& path);

// The registry: architecture name -> loader. Every family registers one line.
using ModelLoader = Result<std::unique_ptr<Model>> (*)(const format::GgufFile& gguf);
struct RegistryEntry {
  const char* arch;
  ModelLoader load;
};
const std::vector<RegistryEntry>& model_registry();

}  // namespace chimera::models
