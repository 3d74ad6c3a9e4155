// Constrained sampling step (see constrained_sampling.h).
#include "runtime/grammar/constrained_sampling.h"

namespace chimera::runtime::grammar {

Result<int32_t> sample_constrained(Sampler& sampler, GrammarMatcher& m, const float* logits, int32_t n_vocab,
                                   std::vector<uint64_t>& scratch) {
  if (sampler.params().temperature <= 0.0f && !m.finished()) {
    const int32_t best = sampler.sample(logits, n_vocab);
    if (best >= 0 && best < m.vocab_size()) {
      GrammarMatcher probe = m;
      if (probe.accept(best).is_ok()) {
        m = std::move(probe);
        return best;
      }
    }
  }
  CHIMERA_ASSIGN_OR_RETURN(size_t n_allowed, m.fill_mask(scratch, n_vocab));
  if (n_allowed == 0) {
    if (!m.is_complete() && !m.finished())
      return invalid_argument("grammar: no token of the vocabulary can continue the text");
    return -1;
  }
  const int32_t tok = sampler.sample(logits, n_vocab, scratch.data());
  CHIMERA_RETURN_IF_ERROR(m.accept(tok));
  return tok;
}

}  // namespace chimera::runtime::grammar
