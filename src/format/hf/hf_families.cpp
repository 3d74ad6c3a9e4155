// The registered Hugging Face families. Each family is one FamilySpec in its
// own hf_family_*.cpp: the config.json -> `<arch>.*` hyper-parameter mapping
// and the tensor-name table (see hf_convert.h). Keys that a checkpoint's
// config.json omits take the released model's (or llama.cpp's) defaults,
// documented per family in docs/CONVERT.md. Invariants: every size written is
// validated (positive, divisible where the math needs it) so the model loader
// never sees an impossible plan; layer kinds are derived from the config,
// never hard-coded indices.
#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {

const std::vector<FamilySpec>& families() {
  static const std::vector<FamilySpec> kFamilies = {phi4flash_spec(), llama_spec(),  mamba2_spec(),
                                                    mamba_spec(),     granitehybrid_spec(), phimoe_spec(),
                                                    llada_spec(),     dream_spec(),  bitnet_spec()};
  return kFamilies;
}

}  // namespace chimera::format::hf
