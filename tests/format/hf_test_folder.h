// Helpers shared by the Hugging Face converter tests: write a checkpoint folder
// from a golden GGUF (safetensors, a byte-level BPE tokenizer.json rendered
// from the GGUF's own vocabulary), compare a converted file with the golden
// one (arch keys, tensor bytes) and compute logits with models::load_model.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "format/hf/hf_convert.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::format::hf::hftest {

// Converter options with the output check every caller passes
// (models::check_model_header: the loader's checks before the file is written).
inline ConvertOptions checked() {
  ConvertOptions o;
  o.check = &models::check_model_header;
  return o;
}

struct StTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;  // PyTorch order
  std::vector<uint8_t> bytes;
};

inline void write_safetensors(const std::filesystem::path& path, const std::vector<StTensor>& ts) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (const StTensor& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  const std::string hs = h.dump();
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = hs.size();
  f.write((const char*)&n, 8);
  f << hs;
  for (const StTensor& t : ts) f.write((const char*)t.bytes.data(), (std::streamsize)t.bytes.size());
}

// A GGUF tensor as the HF checkpoint stores it: same bytes, PyTorch shape
// (the reverse of ne unless `shape` is given).
inline StTensor st_from_gguf(const GgufTensorInfo& t, std::string hf_name, std::vector<int64_t> shape = {}) {
  StTensor s;
  s.name = std::move(hf_name);
  s.dtype = t.type == GgmlType::F16 ? "F16" : t.type == GgmlType::BF16 ? "BF16" : "F32";
  if (shape.empty()) shape.assign(t.ne.rbegin(), t.ne.rend());
  s.shape = std::move(shape);
  s.bytes.assign(t.data, t.data + t.n_bytes);
  return s;
}

// A Mamba `ssm_a` (F32) as the checkpoint's A_log = log(-A), rounded to f32.
// -exp(A_log) in f32 is not always A again (A = -7 has no f32 A_log that gives
// it back), so `a_back` receives the bytes of the A a converter must write.
inline StTensor a_log_from_gguf(const GgufTensorInfo& t, std::string hf_name, std::vector<int64_t> shape,
                                std::vector<uint8_t>* a_back) {
  EXPECT_EQ(t.type, GgmlType::F32);
  StTensor s = st_from_gguf(t, std::move(hf_name), std::move(shape));
  a_back->resize(t.n_bytes);
  float* v = (float*)s.bytes.data();
  for (uint64_t k = 0; k < t.n_elements; ++k) {
    v[k] = (float)std::log(-(double)v[k]);
    const float back = -std::exp(v[k]);
    std::memcpy(a_back->data() + 4 * k, &back, 4);
  }
  return s;
}

// Inverse of llama.cpp's Q/K permutation: HF row (h, j * d/2 + i) = GGUF row
// (h, 2i + j), rotate-half order.
inline std::vector<uint8_t> unpermute(const GgufTensorInfo& t, int64_t n_heads) {
  const int64_t rows = t.ne[1], d = rows / n_heads, half = d / 2;
  const size_t rb = t.n_bytes / (size_t)rows;
  std::vector<uint8_t> out(t.n_bytes);
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(out.data() + (size_t)(h * d + j * half + i) * rb, t.data + (size_t)(h * d + 2 * i + j) * rb, rb);
  return out;
}

// GPT-2's byte -> printable character map (byte-level BPE alphabet).
inline std::string byte_char(int b) {
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  int cp = b;
  if (!printable(b)) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!printable(x)) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += (char)cp;
  } else {
    s += (char)(0xC0 | (cp >> 6));
    s += (char)(0x80 | (cp & 0x3F));
  }
  return s;
}

inline const char* const kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline const char* const kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A small byte-level BPE tokenizer.json: the 256 byte pieces, six merges
// ("hello", " w", "or"), `specials` as special added tokens (id, content), and
// a Split pre-tokenizer with `split_regex` followed by ByteLevel.
inline nlohmann::json byte_level_bpe_json(const char* split_regex,
                                          const std::vector<std::pair<int, std::string>>& specials) {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::string> merged = {"he", "ll", "hell", "hello", byte_char(' ') + "w", "or"};
  for (size_t i = 0; i < merged.size(); ++i) vocab[merged[i]] = 256 + (int)i;
  const json merges = {"h e", "l l", "he ll", "hell o", byte_char(' ') + " w", "o r"};
  json added = json::array();
  for (const auto& [id, content] : specials) added.push_back({{"id", id}, {"content", content}, {"special", true}});
  json pre = {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"}, {"pattern", {{"Regex", split_regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"pre_tokenizer", pre},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", true}}}};
}

// tokenizer.json (BPE) holding a "gpt2" GGUF vocabulary: CONTROL tokens become
// special added tokens, the others the BPE vocabulary; the merges are copied.
inline nlohmann::json bpe_tokenizer_json(const GgufFile& g, const nlohmann::json& pre_tokenizer) {
  using nlohmann::json;
  const GgufValue* toks = g.get_array("tokenizer.ggml.tokens");
  const GgufValue* types = g.get_array("tokenizer.ggml.token_type");
  const GgufValue* merges = g.get_array("tokenizer.ggml.merges");
  EXPECT_TRUE(toks && types && merges);
  json vocab = json::object(), added = json::array(), m = json::array();
  if (!toks || !types || !merges) return json::object();
  for (size_t i = 0; i < toks->arr.size(); ++i) {
    if (types->arr[i].as_int() == 3) {
      added.push_back({{"id", i}, {"content", toks->arr[i].s}, {"special", true}});
    } else {
      vocab[toks->arr[i].s] = i;
    }
  }
  for (const GgufValue& v : merges->arr) m.push_back(v.s);
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

// Every `<arch>.*` key of `want` is in `got` with the same value (integers as
// integers, floats as floats, other types exactly) — for the keys in `differ`
// only present; `got` has no other `<arch>.*` key except those in `extra`.
inline void expect_arch_keys_equal(const GgufFile& got, const GgufFile& want, const std::string& arch,
                                   const std::set<std::string>& extra = {}, const std::set<std::string>& differ = {}) {
  const std::string prefix = arch + ".";
  for (const auto& [k, v] : want.metadata()) {
    if (k.rfind(prefix, 0) != 0) continue;
    if (differ.count(k)) {
      EXPECT_NE(got.find(k), nullptr) << k;
      continue;
    }
    const GgufValue* g = got.find(k);
    ASSERT_NE(g, nullptr) << k;
    if (v.is_float()) {
      EXPECT_EQ(got.get_float(k), want.get_float(k)) << k;
    } else if (v.type != GgufType::BOOL && v.as_int()) {
      EXPECT_EQ(g->as_int(), v.as_int()) << k;
    } else {
      EXPECT_TRUE(*g == v) << k << ": " << g->to_display() << " != " << v.to_display();
    }
  }
  for (const auto& [k, v] : got.metadata()) {
    if (k.rfind(prefix, 0) == 0 && !want.find(k)) {
      EXPECT_TRUE(extra.count(k)) << "unexpected key " << k;
    }
  }
}

// Same tensor names, shapes, types and bytes.
inline void expect_tensors_equal(const GgufFile& got, const GgufFile& want) {
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (const GgufTensorInfo& t : want.tensors()) {
    const GgufTensorInfo* c = got.find_tensor(t.name);
    ASSERT_NE(c, nullptr) << t.name;
    EXPECT_EQ(c->ne, t.ne) << t.name;
    EXPECT_EQ(c->type, t.type) << t.name;
    EXPECT_EQ(c->n_bytes, t.n_bytes) << t.name;
    if (c->n_bytes == t.n_bytes) {
      EXPECT_EQ(std::memcmp(c->data, t.data, t.n_bytes), 0) << t.name;
    }
  }
}

// A copy of `g` at `path` (same keys, tensors in order) with the bytes of the
// tensors named in `replace` swapped: the golden weights as a converter must
// produce them when a transform (A = -exp(A_log)) cannot give the golden
// value back exactly.
inline void write_gguf_with(const GgufFile& g, const std::string& path,
                            const std::map<std::string, std::vector<uint8_t>>& replace) {
  GgufWriter w;
  for (const auto& [k, v] : g.metadata()) w.set(k, v);
  for (const GgufTensorInfo& t : g.tensors()) {
    auto it = replace.find(t.name);
    if (it != replace.end()) {
      ASSERT_EQ(it->second.size(), t.n_bytes) << t.name;
      ASSERT_TRUE(w.add_tensor_copy(t.name, t.type, t.ne, it->second).is_ok());
    } else {
      ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
    }
  }
  ASSERT_TRUE(w.write(path).is_ok());
}

// All-position logits of `ids` (prompt in one batch).
inline std::vector<float> logits_of(const std::string& path,
                                    const std::vector<int32_t>& ids = {1, 17, 300, 2999, 42, 7, 1024, 5}) {
  auto m = models::load_model(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return {};
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(32);
  std::vector<float> out(ids.size() * (size_t)(*m)->info().n_vocab);
  EXPECT_TRUE(ctx.forward(*st, ids.data(), (int64_t)ids.size(), models::Logits::kAll, out.data(), nullptr).is_ok());
  return out;
}

// `chimera convert -q DIR -o OUT --type q8_0`: converted and quantized in one
// run, no temporary file left, `tensor` is Q8_0, and the file equals what
// `chimera quantize REF Q8_0` makes of the unquantized reference `ref` (same
// tensors byte for byte, bit-identical logits).
// The Mamba families' check: logits of `out` bit-identical to `ref`'s (the
// golden weights with the converted A, written by our GGUF writer) and within
// the F32 golden tolerance (1e-3 of the logit scale) of `golden`'s.
inline void expect_logits_exact_and_near(const std::string& out, const std::string& ref, const std::string& golden) {
  const std::vector<float> want = logits_of(ref), got = logits_of(out), golden_logits = logits_of(golden);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(golden_logits.size(), want.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0);
  float worst = 0, scale = 1;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - golden_logits[i]));
    scale = std::max(scale, std::fabs(golden_logits[i]));
  }
  EXPECT_LE(worst, 1e-3f * scale);
}

// The same for any quantization type (`type` as the CLI takes it, `want` the
// GGML type `tensor` must get).
inline void expect_cli_quantized_equals(const std::string& dir, const std::string& out, const std::string& ref,
                                        const std::string& tensor, const std::string& type, GgmlType want) {
  const std::string refq = out + ".ref-quant.gguf";
  std::filesystem::remove(out);
  const std::string cmd = test::chimera_binary() + " convert -q " + dir + " -o " + out + " --type " + type;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_FALSE(std::filesystem::exists(out + ".unquantized.partial"));
  const std::string qcmd = test::chimera_binary() + " quantize " + ref + " " + refq + " " + type + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(qcmd.c_str()), 0) << qcmd;
  auto g = GgufFile::open(out);
  auto r = GgufFile::open(refq);
  ASSERT_TRUE(g.is_ok() && r.is_ok());
  const GgufTensorInfo* t = (*g)->find_tensor(tensor);
  ASSERT_NE(t, nullptr) << tensor;
  EXPECT_EQ(t->type, want) << tensor;
  expect_tensors_equal(**g, **r);
  const std::vector<float> q = logits_of(out), want = logits_of(refq);
  ASSERT_EQ(q.size(), want.size());
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(std::memcmp(q.data(), want.data(), q.size() * 4), 0);
  std::filesystem::remove(out);
  std::filesystem::remove(refq);
}

inline void expect_cli_q8_0_equals_quantized(const std::string& dir, const std::string& out, const std::string& ref,
                                             const std::string& tensor) {
  expect_cli_quantized_equals(dir, out, ref, tensor, "q8_0", GgmlType::Q8_0);
}

}  // namespace chimera::format::hf::hftest
