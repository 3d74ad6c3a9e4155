// Writes the quantizer known-answer vectors (tests/data/quant_kat.txt) with
// llama.cpp's own quantizers: for every weight type chimera quantizes, the
// bytes ggml_quantize_chunk produces without an imatrix (what llama-quantize
// writes) for the rows of tests/kernels/quant_kat_input.h, and a digest of
// ggml's dequantization of those bytes. Built against a llama.cpp checkout
// outside this repository; see scripts/llamacpp_refs/README.md for the command.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "ggml-quants.h"  // ggml/src: quantize_row_q8_K_ref, dequantize_row_q8_K
#include "../../tests/kernels/quant_kat_input.h"

namespace {

struct Kind {
  const char* name;
  ggml_type type;
};

void emit(FILE* out, const char* name, const std::vector<uint8_t>& bytes, uint64_t digest) {
  std::fprintf(out, "TYPE %s bytes %zu dequant_fnv1a %016" PRIx64 "\n", name, bytes.size(), digest);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::fprintf(out, "%02x", bytes[i]);
    if (i % 64 == 63 || i + 1 == bytes.size()) std::fputc('\n', out);
  }
  std::fprintf(out, "END\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT.txt LLAMA_CPP_COMMIT\n", argv[0]);
    return 2;
  }
  FILE* out = std::fopen(argv[1], "w");
  if (!out) {
    std::perror(argv[1]);
    return 1;
  }
  ggml_cpu_init();
  const std::vector<float> x = chimera::kat::kat_input();
  const int64_t rows = chimera::kat::kRows, per_row = chimera::kat::kPerRow;
  std::fprintf(out, "# Quantizer known-answer vectors made by llama.cpp %s (ggml_quantize_chunk, no imatrix),\n", argv[2]);
  std::fprintf(out, "# input: tests/kernels/quant_kat_input.h (%" PRId64 " rows x %" PRId64 ").\n", rows, per_row);
  std::fprintf(out, "# Generator: scripts/llamacpp_refs/quant_kat.cpp (command in scripts/llamacpp_refs/README.md).\n");
  std::fprintf(out, "INPUT rows %" PRId64 " per_row %" PRId64 " fnv1a %016" PRIx64 "\n", rows, per_row,
               chimera::kat::fnv1a(x.data(), x.size() * sizeof(float)));
  const Kind kinds[] = {{"Q4_0", GGML_TYPE_Q4_0},   {"Q4_1", GGML_TYPE_Q4_1},   {"Q5_0", GGML_TYPE_Q5_0},
                        {"Q5_1", GGML_TYPE_Q5_1},   {"Q8_0", GGML_TYPE_Q8_0},   {"Q2_K", GGML_TYPE_Q2_K},
                        {"Q3_K", GGML_TYPE_Q3_K},   {"Q4_K", GGML_TYPE_Q4_K},   {"Q5_K", GGML_TYPE_Q5_K},
                        {"Q6_K", GGML_TYPE_Q6_K},   {"IQ4_NL", GGML_TYPE_IQ4_NL}, {"IQ4_XS", GGML_TYPE_IQ4_XS},
                        {"TQ1_0", GGML_TYPE_TQ1_0}, {"TQ2_0", GGML_TYPE_TQ2_0}};
  std::vector<float> back((size_t)(rows * per_row));
  for (const Kind& k : kinds) {
    ggml_quantize_init(k.type);
    std::vector<uint8_t> q(ggml_row_size(k.type, per_row) * (size_t)rows);
    const size_t n = ggml_quantize_chunk(k.type, x.data(), q.data(), 0, rows, per_row, nullptr);
    if (n != q.size()) {
      std::fprintf(stderr, "%s: %zu bytes, expected %zu\n", k.name, n, q.size());
      return 1;
    }
    ggml_get_type_traits(k.type)->to_float(q.data(), back.data(), rows * per_row);
    emit(out, k.name, q, chimera::kat::fnv1a(back.data(), back.size() * sizeof(float)));
  }
  // The activation quantizer of the K-quant dot products (reference rounding).
  {
    std::vector<uint8_t> q(ggml_row_size(GGML_TYPE_Q8_K, per_row) * (size_t)rows);
    quantize_row_q8_K_ref(x.data(), (block_q8_K*)q.data(), rows * per_row);
    dequantize_row_q8_K((const block_q8_K*)q.data(), back.data(), rows * per_row);
    emit(out, "Q8_K", q, chimera::kat::fnv1a(back.data(), back.size() * sizeof(float)));
  }
  std::fclose(out);
  return 0;
}
