// One constrained sampling step, shared by the generator and the server
// engine: the grammar's token mask applied to the sampler, then the matcher
// advanced over the drawn token.
//
// Greedy steps (temperature <= 0) first take the unmasked argmax and keep it
// when the grammar accepts it — exactly the masked argmax then, since masking
// only removes candidates — so the mask walk is only paid when the model's
// favourite token is not allowed. Sampled steps always mask first (the
// filters — top-k, top-p, min-p — then run on allowed tokens only).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runtime/grammar/grammar_constraint.h"
#include "runtime/sampler.h"

namespace chimera::runtime::grammar {

// The drawn token (already accepted by m), or -1 when the grammar allows
// nothing more (m is complete; stop). `scratch` holds the mask between calls.
Result<int32_t> sample_constrained(Sampler& sampler, GrammarMatcher& m, const float* logits, int32_t n_vocab,
                                   std::vector<uint64_t>& scratch);

}  // namespace chimera::runtime::grammar
