// Reference (de)quantizers for the legacy ggml block types (placeholder while being written).
namespace chimera::quant {}
