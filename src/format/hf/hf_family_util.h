// Shared helpers of the Hugging Face family tables (hf_family_*.cpp): typed,
// validated config.json reads (errors name the key) and the registered
// families' spec constructors. Invariant: every size a helper returns is
// positive and below 2^31.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "format/gguf/tensor_names.h"
#include "format/hf/hf_convert.h"

namespace chimera::format::hf {

// A positive integer key; `def` when absent or null.
Result<int64_t> get_int(const nlohmann::json& c, const char* key, int64_t def);
// A key the family cannot default (the tensor shapes depend on it).
Result<int64_t> require_int(const nlohmann::json& c, const char* key);
// A positive finite number; `def` when absent or null.
Result<double> get_float(const nlohmann::json& c, const char* key, double def);
// The first of `keys` that config.json sets (llama.cpp's find_hparam order);
// the first key when none is set (so errors name the preferred spelling).
const char* pick(const nlohmann::json& c, std::initializer_list<const char*> keys);
// A boolean switch the converter cannot honour when it differs from `supported`.
Status refuse_bool(const nlohmann::json& c, const char* key, bool supported, const char* family);
// vocab_size rounded up to pad_vocab_size_multiple (llama.cpp's Mamba padding).
Result<int64_t> padded_vocab(const nlohmann::json& c, int64_t def_multiple);
// Writes `<arch>.<key>` = value as u32 for each pair (sizes validated by the caller).
void set_u32s(GgufWriter& w, const std::string& arch, std::initializer_list<std::pair<const char*, int64_t>> kv);

FamilySpec phi4flash_spec();      // hf_family_phi4flash.cpp
FamilySpec llama_spec();          // hf_family_llama.cpp
FamilySpec mamba2_spec();         // hf_family_mamba.cpp
FamilySpec mamba_spec();          // hf_family_mamba.cpp
FamilySpec granitehybrid_spec();  // hf_family_granite.cpp
FamilySpec phimoe_spec();         // hf_family_phimoe.cpp
FamilySpec llada_spec();          // hf_family_llada.cpp
FamilySpec dream_spec();          // hf_family_dream.cpp
FamilySpec bitnet_spec();         // hf_family_bitnet.cpp

}  // namespace chimera::format::hf
