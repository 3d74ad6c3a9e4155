// `chimera quantize IN OUT tq2_0|tq1_0` (quant/quantize_model.h, quant/ternarize.h):
//  - the per-tensor types equal llama-quantize's for the same ftype: the golden
//    quant-llama-TQ{1,2}_0 files (256-wide rows, tied head -> Q6_K) and tiny-llama
//    (64-wide rows: every matrix falls back to Q4_0, the untied token_embd Q4_K ->
//    Q5_0, output.weight Q8_0 — what llama-quantize printed for that file);
//  - every ternarized matrix decodes to exactly clamp(round(w / s), -1, 1) * f16(s)
//    with s = mean |w| over the whole matrix (computed here independently);
//  - the output loads and runs, TQ1_0 and TQ2_0 (same ternary values) give the
//    same logits, and the CLI warns that quality needs ternary-trained weights;
//  - rows that are not whole 256-blocks fall back (CLI) or are a clear error
//    (ternarize_matrices); 3-D tensors get one scale per 2-D slice.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "models/context.h"
#include "models/model.h"
#include "quant/quantize_model.h"
#include "gguf_inspect.h"
#include "test_util.h"

namespace chimera {
namespace {

using format::GgmlType;
using RunResult = test::ShellResult;
using test::run_chimera;
using test::tensor_types;

std::vector<float> decode_tensor(const format::GgufTensorInfo& t) {
  std::vector<float> f(t.n_elements);
  const int64_t nx = t.dim(0);
  const size_t row = format::ggml_row_size(t.type, nx);
  for (uint64_t r = 0; r < t.n_elements / (uint64_t)nx; ++r)
    EXPECT_TRUE(quant::decode_row(t.type, t.data + r * row, nx, f.data() + r * nx).is_ok()) << t.name;
  return f;
}

// The golden quant-llama model as an F32 GGUF (its Q8_0 weights decoded): a llama with
// 256-wide rows and a tied head, so every matrix is ternarizable.
std::string make_f32_llama(const std::string& shared) {
  auto g = format::GgufFile::open(shared + "/golden/models/quant-llama-Q8_0.gguf");
  EXPECT_TRUE(g.is_ok());
  format::GgufWriter w;
  for (const auto& [k, v] : (*g)->metadata()) w.set(k, v);
  w.set("general.file_type", format::GgufValue::from_u32(0));
  for (const auto& t : (*g)->tensors()) {
    const std::vector<float> f = decode_tensor(t);
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    EXPECT_TRUE(w.add_tensor_copy(t.name, GgmlType::F32, t.ne, std::move(bytes)).is_ok());
  }
  const std::string out = test::temp_path("tq-llama-f32.gguf");
  EXPECT_TRUE(w.write(out).is_ok());
  return out;
}

// Independent absmean ternarization of one matrix: code * f16(s).
std::vector<float> absmean_ternary(const float* w, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::fabs((double)w[i]);
  const float s = std::max((float)(sum / (double)n), 1e-5f);
  const float sd = f16_to_f32(f32_to_f16(s));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const float c = std::nearbyint(w[i] / s);
    out[i] = (c > 0 ? 1.f : c < 0 ? -1.f : 0.f) * sd;
  }
  return out;
}

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& ids, int64_t* nv) {
  auto m = models::load_model(path);
  EXPECT_TRUE(m.is_ok()) << path << ": " << m.status().message();
  if (!m) return {};
  *nv = (*m)->info().n_vocab;
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(64);
  std::vector<float> out(ids.size() * (size_t)*nv);
  Status s = ctx.forward(*st, ids.data(), (int64_t)ids.size(), models::Logits::kAll, out.data(), nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

TEST(QuantizeTernary, RulesMatchLlamaQuantize) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* type : {"TQ1_0", "TQ2_0", "tq2_0"}) {
    const quant::QuantMix* mix = quant::find_quant_mix(type);
    ASSERT_NE(mix, nullptr) << type;
    const std::string upper = std::string(mix->name);
    EXPECT_EQ(mix->ftype, upper == "TQ1_0" ? 36u : 37u);  // LLAMA_FTYPE_MOSTLY_TQ1_0 / TQ2_0
    auto ref = format::GgufFile::open(shared + "/golden/models/quant-llama-" + upper + ".gguf");
    ASSERT_TRUE(ref.is_ok());
    std::vector<quant::TensorShape> shapes;
    for (const auto& t : (*ref)->tensors()) shapes.push_back({t.name, t.ne});
    const quant::MixContext ctx = quant::make_mix_context(shapes, 4, 2);
    for (const auto& t : (*ref)->tensors()) {
      const quant::TensorShape s{t.name, t.ne};
      const GgmlType got = quant::is_quantizable(s) ? quant::choose_tensor_type(*mix, ctx, s) : GgmlType::F32;
      EXPECT_EQ(got, t.type) << type << " " << t.name;
    }
  }
}

TEST(QuantizeTernary, TernarizesGoldenLlamaExactly) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string in = make_f32_llama(shared);
  auto src = format::GgufFile::open(in);
  ASSERT_TRUE(src.is_ok());
  const std::vector<int32_t> ids = {1, 450, 7483, 310, 3444, 338};
  std::map<std::string, std::vector<float>> logits;
  for (const char* type : {"tq2_0", "TQ1_0"}) {
    const std::string upper = type[2] == '2' ? "TQ2_0" : "TQ1_0";
    const GgmlType tq = upper == "TQ2_0" ? GgmlType::TQ2_0 : GgmlType::TQ1_0;
    const std::string out = test::temp_path("tq-llama-" + upper + ".gguf");
    RunResult r = run_chimera("quantize " + in + " " + out + " " + type + " --threads 2");
    ASSERT_EQ(r.rc, 0) << r.output;
    EXPECT_NE(r.output.find("warning: " + upper + " ternarizes every weight matrix"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("ternary-trained"), std::string::npos) << r.output;
    // Same storage types as llama-quantize wrote for this model.
    EXPECT_EQ(tensor_types(out), tensor_types(shared + "/golden/models/quant-llama-" + upper + ".gguf")) << type;
    auto q = format::GgufFile::open(out);
    ASSERT_TRUE(q.is_ok());
    EXPECT_EQ((*q)->get_int("general.file_type"), upper == "TQ2_0" ? 37 : 36);
    int n_tq = 0;
    for (const auto& t : (*q)->tensors()) {
      const format::GgufTensorInfo* o = (*src)->find_tensor(t.name);
      ASSERT_NE(o, nullptr);
      if (t.type != tq) continue;
      ++n_tq;
      const std::vector<float> got = decode_tensor(t);
      const std::vector<float> want = absmean_ternary(reinterpret_cast<const float*>(o->data), o->n_elements);
      ASSERT_EQ(got.size(), want.size());
      size_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
      EXPECT_EQ(bad, 0u) << type << " " << t.name;
    }
    EXPECT_EQ(n_tq, 14);  // 7 matrices x 2 layers; token_embd (tied head) is Q6_K
    int64_t nv = 0;
    logits[upper] = logits_of(out, ids, &nv);
    ASSERT_EQ(logits[upper].size(), ids.size() * (size_t)nv);
    for (float v : logits[upper]) ASSERT_TRUE(std::isfinite(v));
    std::filesystem::remove(out);
  }
  // TQ1_0 and TQ2_0 hold the same ternary values: the logits agree up to kernel rounding.
  double mx = 0, ss = 0;
  for (size_t i = 0; i < logits["TQ2_0"].size(); ++i) {
    mx = std::max(mx, std::fabs((double)logits["TQ2_0"][i] - logits["TQ1_0"][i]));
    ss += (double)logits["TQ2_0"][i] * logits["TQ2_0"][i];
  }
  EXPECT_LT(mx, 1e-3 * std::sqrt(ss / (double)logits["TQ2_0"].size())) << mx;
  std::filesystem::remove(in);
}

TEST(QuantizeTernary, NarrowRowsFallBackLikeLlamaQuantize) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string out = test::temp_path("tq-tiny-llama.gguf");
  RunResult r = run_chimera("quantize " + shared + "/golden/models/tiny-llama.gguf " + out + " TQ2_0");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("(fallback: row length)"), std::string::npos) << r.output;
  for (const auto& [name, type] : tensor_types(out)) {
    if (name.find("norm") != std::string::npos) {
      EXPECT_EQ(type, GgmlType::F32) << name;
    }
    else if (name == "output.weight") EXPECT_EQ(type, GgmlType::Q8_0);
    else if (name == "token_embd.weight") EXPECT_EQ(type, GgmlType::Q5_0);  // Q4_K -> Q5_0
    else EXPECT_EQ(type, GgmlType::Q4_0) << name;
  }
  int64_t nv = 0;
  const std::vector<float> l = logits_of(out, {1, 2, 3}, &nv);
  for (float v : l) ASSERT_TRUE(std::isfinite(v));
  std::filesystem::remove(out);
}

TEST(QuantizeTernary, MatrixErrorsAndPerSliceScales) {
  std::vector<uint8_t> buf(66 * 16);
  std::vector<float> w(256 * 6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = (float)((int)(i % 7) - 3) * (1.f + (float)(i / 512));
  // Rows of 128 are not whole 256-blocks.
  Status s = quant::ternarize_matrices(GgmlType::TQ2_0, w.data(), {128, 12}, buf.data(), buf.size());
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("256"), std::string::npos) << s.message();
  s = quant::ternarize_matrices(GgmlType::Q4_0, w.data(), {256, 6}, buf.data(), buf.size());
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("TQ1_0/TQ2_0"), std::string::npos) << s.message();
  s = quant::ternarize_matrices(GgmlType::TQ2_0, w.data(), {256, 6}, buf.data(), 10);
  EXPECT_FALSE(s.is_ok());
  // A 3-D [256, 2, 3] tensor: three matrices with their own absmean.
  std::vector<float> scales;
  ASSERT_TRUE(quant::ternarize_matrices(GgmlType::TQ2_0, w.data(), {256, 2, 3}, buf.data(), buf.size(), &scales).is_ok());
  ASSERT_EQ(scales.size(), 3u);
  for (int m = 0; m < 3; ++m) {
    const std::vector<float> want = absmean_ternary(w.data() + m * 512, 512);
    std::vector<float> got(512);
    ASSERT_TRUE(quant::decode_row(GgmlType::TQ2_0, buf.data() + m * 2 * 66, 512, got.data()).is_ok());
    EXPECT_EQ(got, want) << m;
  }
  EXPECT_LT(scales[0], scales[1]);
  EXPECT_LT(scales[1], scales[2]);
}

}  // namespace
}  // namespace chimera
