// The model registry: one line per architecture, its loader and its tensor
// table (models/tensor_table.h). tests/models enumerates it and loads every
// family's golden fixture.
#include "models/model.h"
#include "models/tensor_table.h"

namespace chimera::models {

Result<std::unique_ptr<Model>> load_llama(const format::GgufFile& gguf);
Result<std::unique_ptr<Model>> load_phimoe(const format::GgufFile& gguf);
Result<std::unique_ptr<Model>> load_llada(const format::GgufFile& gguf);  // models/llada.cpp
Result<std::unique_ptr<Model>> load_dream(const format::GgufFile& gguf);  // models/llada.cpp
Result<std::unique_ptr<Model>> load_mamba(const format::GgufFile& gguf);
Result<std::unique_ptr<Model>> load_mamba2(const format::GgufFile& gguf);
Result<std::unique_ptr<Model>> load_granitehybrid(const format::GgufFile& gguf);
Result<std::unique_ptr<Model>> load_bitnet(const format::GgufFile& gguf);  // models/bitnet.cpp
Result<std::unique_ptr<Model>> load_bitnet_b158(const format::GgufFile& gguf);  // models/bitnet.cpp (relu²)
Result<std::unique_ptr<Model>> load_bitnet_25(const format::GgufFile& gguf);    // models/bitnet.cpp (relu²)
Result<std::unique_ptr<Model>> load_phi4flash(const format::GgufFile& gguf);
// True when load_bitnet hands the file to models/bitnet_llama2c.cpp (models/bitnet.cpp).
bool bitnet_uses_llama2c_bitlinear(const format::GgufFile& gguf);

// Tensor tables (models/tensor_table.h), models/<family>_tensors.cpp.
const TensorTable& llama_tensors();
const TensorTable& mamba_tensors();   // models/mamba_tensors.cpp
const TensorTable& mamba2_tensors();  // models/mamba_tensors.cpp
const TensorTable& granitehybrid_tensors();
const TensorTable& llada_tensors();  // llada and dream
const TensorTable& bitnet_tensors();  // bitnet, bitnet-b1.58, bitnet-25
const TensorTable& phimoe_tensors();
const TensorTable& phi4flash_tensors();

const std::vector<RegistryEntry>& model_registry() {
  static const std::vector<RegistryEntry> kRegistry = {
      {"llama", load_llama, &llama_tensors()},
      {"phimoe", load_phimoe, &phimoe_tensors()},
      {"llada", load_llada, &llada_tensors()},
      {"dream", load_dream, &llada_tensors()},
      {"mamba", load_mamba, &mamba_tensors()},
      {"mamba2", load_mamba2, &mamba2_tensors()},
      {"granitehybrid", load_granitehybrid, &granitehybrid_tensors()},
      {"bitnet", load_bitnet, &bitnet_tensors()},
      {"bitnet-b1.58", load_bitnet_b158, &bitnet_tensors()},  // Microsoft's BitNet b1.58 2B-4T GGUFs (bitnet.cpp)
      {"bitnet-25", load_bitnet_25, &bitnet_tensors()},       // their first (April 2025) arch name, same graph
      {"phi4flash", load_phi4flash, &phi4flash_tensors(), /*typed_kv=*/false},
  };
  return kRegistry;
}

layers::KvCacheTypes default_kv_types_for(const format::GgufFile& gguf) {
  const std::string arch = gguf.architecture();
  for (const auto& e : model_registry()) {
    if (arch != e.arch) continue;
    if (!e.typed_kv) return {};
    // load_bitnet hands llama2.c BitNet conversions to models/bitnet_llama2c.cpp,
    // whose attention reads f32.
    if (arch == "bitnet" && bitnet_uses_llama2c_bitlinear(gguf)) return {};
    return layers::kDefaultKvCacheTypes;
  }
  return {};
}

}  // namespace chimera::models
