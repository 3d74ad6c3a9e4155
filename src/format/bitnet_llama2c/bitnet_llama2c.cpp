// Reader and GGUF converter for ternary llama2.c-style checkpoints (format and
// GGUF layout: bitnet_llama2c.h). The file is untrusted: the header values are
// range-checked, every size is computed in 64 bits and must match the file
// size exactly, and unknown code 10 is an error. Conversion is lossless: codes
// go into TQ2_0 blocks with scale 1.0 (f16 0x3C00) and the fp32 scales into
// 1-element F32 tensors, bit for bit.
#include "format/bitnet_llama2c/bitnet_llama2c.h"

#include <cstring>
#include <filesystem>
#include <system_error>

#include "format/gguf/gguf.h"
#include "format/gguf/tensor_names.h"
#include "format/llama2c/llama2c.h"

namespace chimera::format::bitnet_llama2c {
namespace {

constexpr int64_t kBlock = 256;      // TQ2_0 elements per block
constexpr int64_t kTq2Bytes = 66;    // sizeof(block_tq2_0)
// The seven BitLinear matrices in checkpoint order: GGUF weight and scale names.
struct KindNames {
  const char* weight;
  const char* scale;
};
constexpr KindNames kKinds[7] = {{tn::kAttnQ, tn::kAttnQScale},         {tn::kAttnK, tn::kAttnKScale},
                                 {tn::kAttnV, tn::kAttnVScale},         {tn::kAttnOutput, tn::kAttnOutputScale},
                                 {tn::kFfnGate, tn::kFfnGateScale},     {tn::kFfnDown, tn::kFfnDownScale},
                                 {tn::kFfnUp, tn::kFfnUpScale}};

template <class T>
T rd(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Result<Checkpoint> Checkpoint::parse(const uint8_t* data, size_t size, const std::string& what) {
  if (size < (size_t)kHeaderBytes) return invalid_argument(what + ": truncated header");
  if (rd<uint32_t>(data) != kMagic) return invalid_argument(what + ": not a bitnet-llama2c checkpoint (bad magic)");
  if (rd<int32_t>(data + 4) != 1) return invalid_argument(what + ": unsupported version " + std::to_string(rd<int32_t>(data + 4)));
  Checkpoint ck;
  Config& c = ck.config;
  int32_t v[7];
  for (int i = 0; i < 7; ++i) v[i] = rd<int32_t>(data + 8 + 4 * i);
  c.dim = v[0], c.hidden_dim = v[1], c.n_layers = v[2], c.n_heads = v[3], c.n_kv_heads = v[4];
  c.vocab_size = v[5], c.seq_len = v[6];
  c.shared_classifier = data[36] != 0;
  for (int i = 0; i < 7; ++i)
    if (v[i] <= 0 || v[i] > (1 << 20)) return invalid_argument(what + ": impossible header value " + std::to_string(v[i]));
  if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0 || c.head_size() % 2 != 0)
    return invalid_argument(what + ": inconsistent head counts");
  if (!c.shared_classifier) return unsupported(what + ": unshared classifier is not supported");
  const int64_t dim = c.dim, hid = c.hidden_dim, kv = c.kv_dim();
  const int64_t shapes[7][2] = {{dim, dim}, {kv, dim}, {kv, dim}, {dim, dim}, {hid, dim}, {dim, hid}, {hid, dim}};
  uint64_t need = (uint64_t)kHeaderBytes + 4ull * (uint64_t)dim + 4ull * (uint64_t)dim * (uint64_t)c.vocab_size;
  for (const auto& s : shapes) {
    if ((s[0] * s[1]) % 4 != 0) return invalid_argument(what + ": matrix size not a multiple of 4");
    need += (uint64_t)c.n_layers * (4 + (uint64_t)(s[0] * s[1] / 4));
  }
  if (size != need)
    return invalid_argument(what + ": file holds " + std::to_string(size) + " bytes, the header implies " + std::to_string(need));
  const uint8_t* p = data + kHeaderBytes;
  ck.final_norm.resize((size_t)dim);
  std::memcpy(ck.final_norm.data(), p, (size_t)dim * 4);
  p += dim * 4;
  ck.embedding.resize((size_t)(dim * c.vocab_size));
  std::memcpy(ck.embedding.data(), p, ck.embedding.size() * 4);
  p += ck.embedding.size() * 4;
  for (int k = 0; k < 7; ++k) {
    for (int32_t l = 0; l < c.n_layers; ++l) {
      TernaryMatrix m;
      m.out = shapes[k][0];
      m.in = shapes[k][1];
      m.scale = rd<float>(p);
      p += 4;
      const int64_t n = m.out * m.in;
      m.codes.resize((size_t)n);
      for (int64_t j = 0; j < n; ++j) {
        const int code = (p[j / 4] >> (6 - 2 * (j & 3))) & 3;
        if (code == 2) return invalid_argument(what + ": invalid ternary code 10 in " + tn::at(kKinds[k].weight, l));
        m.codes[(size_t)j] = (int8_t)(code == 1 ? 1 : (code == 3 ? -1 : 0));
      }
      p += n / 4;
      ck.kinds[k].push_back(std::move(m));
    }
  }
  return ck;
}

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  CHIMERA_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> f, MappedFile::open(path));
  return parse(f->data(), f->size(), "'" + path + "'");
}

Status convert(const std::string& model_path, const std::string& vocab_path, const std::string& out_path,
               const ConvertOptions& opts) {
  CHIMERA_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(model_path));
  CHIMERA_ASSIGN_OR_RETURN(llama2c::Vocab vocab, llama2c::Vocab::open(vocab_path));
  const Config& c = ck.config;
  if (vocab.tokens.size() != (size_t)c.vocab_size)
    return invalid_argument("vocabulary mismatch: the vocabulary holds " + std::to_string(vocab.tokens.size()) +
                            " tokens but the checkpoint's vocab_size is " + std::to_string(c.vocab_size));
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    llama2c::GgufToken t = llama2c::to_gguf_token((int32_t)i, vocab.tokens[i]);
    texts.push_back(std::move(t.text));
    scores.push_back(t.score);
    types.push_back((int32_t)t.type);
  }
  GgufWriter w(3);
  w.set("general.architecture", GgufValue::from_string("bitnet"));
  w.set("general.name", GgufValue::from_string(opts.name.empty() ? "bitnet" : opts.name));
  w.set("bitnet.bitlinear", GgufValue::from_string("absmax-int8"));
  w.set("bitnet.context_length", GgufValue::from_u32(opts.context_length ? opts.context_length : (uint32_t)c.seq_len));
  w.set("bitnet.embedding_length", GgufValue::from_u32((uint32_t)c.dim));
  w.set("bitnet.feed_forward_length", GgufValue::from_u32((uint32_t)c.hidden_dim));
  w.set("bitnet.block_count", GgufValue::from_u32((uint32_t)c.n_layers));
  w.set("bitnet.attention.head_count", GgufValue::from_u32((uint32_t)c.n_heads));
  w.set("bitnet.attention.head_count_kv", GgufValue::from_u32((uint32_t)c.n_kv_heads));
  w.set("bitnet.rope.dimension_count", GgufValue::from_u32((uint32_t)c.head_size()));
  w.set("bitnet.rope.freq_base", GgufValue::from_f32(10000.f));
  w.set("bitnet.attention.layer_norm_rms_epsilon", GgufValue::from_f32(1e-5f));
  w.set("tokenizer.ggml.model", GgufValue::from_string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::from_strings(texts));
  w.set("tokenizer.ggml.scores", GgufValue::from_f32s(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::from_i32s(types));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(llama2c::kUnknownId));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(llama2c::kBosId));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(llama2c::kEosId));

  auto f32_bytes = [](const float* x, size_t n) {
    std::vector<uint8_t> b(n * 4);
    std::memcpy(b.data(), x, n * 4);
    return b;
  };
  auto add = [&](const std::string& name, GgmlType type, std::vector<int64_t> ne, std::vector<uint8_t> bytes,
                 const char* tname) -> Status {
    if (opts.progress) opts.progress(name, ne, tname);
    return w.add_tensor_copy(name, type, std::move(ne), std::move(bytes));
  };
  CHIMERA_RETURN_IF_ERROR(add(tn::kTokenEmbd, GgmlType::F32, {c.dim, c.vocab_size},
                              f32_bytes(ck.embedding.data(), ck.embedding.size()), "F32"));
  CHIMERA_RETURN_IF_ERROR(add(tn::kOutputNorm, GgmlType::F32, {c.dim}, f32_bytes(ck.final_norm.data(), (size_t)c.dim), "F32"));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    for (int k = 0; k < 7; ++k) {
      const TernaryMatrix& m = ck.kinds[k][(size_t)l];
      const std::string wname = tn::at(kKinds[k].weight, l);
      const int64_t n = m.out * m.in;
      if (n % kBlock != 0) return invalid_argument(wname + ": element count not a multiple of 256");
      // TQ2_0 block (quant/ternary_blocks.h; not linked from here: format sits
      // below quant): qs[32h + m] bits 2n..2n+1 = trit of element 128h + 32n + m,
      // then f16 d = 1.0.
      std::vector<uint8_t> bytes((size_t)(n / kBlock) * kTq2Bytes, 0);
      for (int64_t b = 0; b < n / kBlock; ++b) {
        uint8_t* blk = bytes.data() + b * kTq2Bytes;
        for (int e = 0; e < kBlock; ++e) {
          const int tr = m.codes[(size_t)(b * kBlock + e)] + 1;
          blk[32 * (e / 128) + e % 32] |= (uint8_t)(tr << (2 * ((e % 128) / 32)));
        }
        blk[64] = 0x00;
        blk[65] = 0x3C;
      }
      std::vector<int64_t> ne = m.in % kBlock == 0 ? std::vector<int64_t>{m.in, m.out}
                                                    : std::vector<int64_t>{kBlock, n / kBlock};
      CHIMERA_RETURN_IF_ERROR(add(wname, GgmlType::TQ2_0, ne, std::move(bytes), "TQ2_0"));
      CHIMERA_RETURN_IF_ERROR(add(tn::at(kKinds[k].scale, l), GgmlType::F32, {1}, f32_bytes(&m.scale, 1), "F32"));
    }
  }
  return w.write(out_path, opts.check);  // via out_path + ".partial"
}

}  // namespace chimera::format::bitnet_llama2c
