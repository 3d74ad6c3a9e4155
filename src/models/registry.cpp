// The model registry: one line per architecture. tests/models enumerates it and
// loads every family's golden fixture.
#include "models/model.h"

namespace chimera::models {

Result<std::unique_ptr<Model>> load_llama(const format::GgufFile& gguf);
Result<std::unique_ptr<Model>> load_phimoe(const format::GgufFile& gguf);

const std::vector<RegistryEntry>& model_registry() {
  static const std::vector<RegistryEntry> kRegistry = {
      {"llama", load_llama},
      {"phimoe", load_phimoe},
  };
  return kRegistry;
}

}  // namespace chimera::models
