// Dream with non-zero q/k/v biases against an independent float64 forward
// (the other Dream tests rewrite tiny-llada with zero biases, which LLaDA's
// reference then covers). tiny-llada's weights are rewritten as arch "dream"
// with random biases; the reference below implements the Qwen2 block from its
// definition — RMSNorm, q/k/v = W·x + b, NEOX RoPE (pairs x[i], x[i + d/2]),
// non-causal softmax attention, SwiGLU, output norm and head — over the same
// F16 weights, and the engine's logits (all rows, every vocabulary column)
// must match it within tolerance × scale, where tolerance is tiny-llada's
// golden tolerance (the engine rounds activations to F16 for F16 weights as
// llama.cpp does). The biases move the logits by far more than that bound,
// so an engine that dropped or misplaced one (e.g. after RoPE) fails.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf.h"
#include "golden_case.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::test {
namespace {

using Matrix = std::vector<double>;  // row-major [rows][cols]

struct Tensor {
  std::vector<int64_t> ne;
  std::vector<double> v;
};

Tensor to_double(const format::GgufTensorInfo& t) {
  Tensor r;
  r.ne = t.ne;
  r.v.resize((size_t)t.n_elements);
  for (size_t i = 0; i < r.v.size(); ++i) {
    if (t.type == format::GgmlType::F16) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      r.v[i] = f16_to_f32(h);
    } else {
      float f;
      std::memcpy(&f, t.data + 4 * i, 4);
      r.v[i] = f;
    }
  }
  return r;
}

// y[o] = Σ_i W[o][i] x[i] (+ b[o]); W in ggml order ne = [in, out].
std::vector<double> matvec(const Tensor& w, const std::vector<double>& x, const Tensor* b = nullptr) {
  const int64_t in = w.ne[0], out = w.ne[1];
  std::vector<double> y((size_t)out, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    double s = 0;
    for (int64_t i = 0; i < in; ++i) s += w.v[(size_t)(o * in + i)] * x[(size_t)i];
    y[(size_t)o] = s + (b ? b->v[(size_t)o] : 0.0);
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const Tensor& g, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / (double)x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g.v[i];
  return y;
}

void rope_neox(std::vector<double>& x, int64_t n_head, int64_t hd, int64_t pos, double base) {
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double th = (double)pos * std::pow(base, -2.0 * (double)i / (double)hd);
      double& a = x[(size_t)(h * hd + i)];
      double& b = x[(size_t)(h * hd + i + hd / 2)];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(th) - b0 * std::sin(th);
      b = a0 * std::sin(th) + b0 * std::cos(th);
    }
}

struct Weights {
  std::map<std::string, Tensor> t;
  int64_t n_layer = 0, n_head = 0, n_embd = 0;
  double eps = 1e-6, base = 10000;
  const Tensor& operator[](const std::string& n) const { return t.at(n); }
};

// Logits [n][n_vocab] of a non-causal pass over `ids`; biases off when !with_bias.
std::vector<double> reference(const Weights& w, const std::vector<int32_t>& ids, bool with_bias) {
  const int64_t n = (int64_t)ids.size(), d = w.n_embd, hd = d / w.n_head;
  const Tensor& emb = w["token_embd.weight"];
  std::vector<std::vector<double>> x((size_t)n);
  for (int64_t p = 0; p < n; ++p) x[(size_t)p].assign(emb.v.begin() + ids[(size_t)p] * d, emb.v.begin() + (ids[(size_t)p] + 1) * d);
  for (int64_t l = 0; l < w.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto bias = [&](const char* name) { return with_bias ? &w[b + name] : nullptr; };
    std::vector<std::vector<double>> q((size_t)n), k((size_t)n), v((size_t)n);
    for (int64_t p = 0; p < n; ++p) {
      const auto xn = rmsnorm(x[(size_t)p], w[b + "attn_norm.weight"], w.eps);
      q[(size_t)p] = matvec(w[b + "attn_q.weight"], xn, bias("attn_q.bias"));
      k[(size_t)p] = matvec(w[b + "attn_k.weight"], xn, bias("attn_k.bias"));
      v[(size_t)p] = matvec(w[b + "attn_v.weight"], xn, bias("attn_v.bias"));
      rope_neox(q[(size_t)p], w.n_head, hd, p, w.base);
      rope_neox(k[(size_t)p], w.n_head, hd, p, w.base);
    }
    for (int64_t p = 0; p < n; ++p) {
      std::vector<double> att((size_t)d, 0.0);
      for (int64_t h = 0; h < w.n_head; ++h) {
        std::vector<double> s((size_t)n);
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += q[(size_t)p][(size_t)(h * hd + i)] * k[(size_t)j][(size_t)(h * hd + i)];
          s[(size_t)j] = dot / std::sqrt((double)hd);
          mx = std::max(mx, s[(size_t)j]);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < hd; ++i) att[(size_t)(h * hd + i)] += s[(size_t)j] / z * v[(size_t)j][(size_t)(h * hd + i)];
      }
      const auto o = matvec(w[b + "attn_output.weight"], att);
      for (int64_t i = 0; i < d; ++i) x[(size_t)p][(size_t)i] += o[(size_t)i];
      const auto xn = rmsnorm(x[(size_t)p], w[b + "ffn_norm.weight"], w.eps);
      auto g = matvec(w[b + "ffn_gate.weight"], xn);
      const auto u = matvec(w[b + "ffn_up.weight"], xn);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const auto dn = matvec(w[b + "ffn_down.weight"], g);
      for (int64_t i = 0; i < d; ++i) x[(size_t)p][(size_t)i] += dn[(size_t)i];
    }
  }
  std::vector<double> out;
  for (int64_t p = 0; p < n; ++p) {
    const auto y = matvec(w["output.weight"], rmsnorm(x[(size_t)p], w["output_norm.weight"], w.eps));
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

TEST(DreamBias, NonZeroQkvBiasesMatchAFloat64Reference) {
  CHIMERA_REQUIRE_SHARED(shared);
  GoldenCase gc;
  ASSERT_TRUE(load_golden(shared + "/golden", "tiny-llada", &gc));
  auto g = format::GgufFile::open(gc.model_path);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  // tiny-llada as arch "dream" with random q/k/v biases (keys renamed; shift_logits dropped).
  format::GgufWriter wr;
  for (const auto& [key, val] : (*g)->metadata()) {
    if (key == "diffusion.shift_logits") continue;
    if (key == "general.architecture") wr.set(key, format::GgufValue::from_string("dream"));
    else if (key.rfind("llada.", 0) == 0) wr.set("dream." + key.substr(6), val);
    else wr.set(key, val);
  }
  Weights w;
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  for (const auto& t : (*g)->tensors()) {
    ASSERT_TRUE(wr.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
    w.t[t.name] = to_double(t);
    for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
      if (t.name.find(std::string(".") + m + ".weight") == std::string::npos) continue;
      const std::string bn = t.name.substr(0, t.name.size() - 6) + "bias";
      std::vector<float> bias((size_t)t.dim(1));
      for (float& x : bias) x = nd(rng);
      std::vector<uint8_t> bytes(bias.size() * 4);
      std::memcpy(bytes.data(), bias.data(), bytes.size());
      ASSERT_TRUE(wr.add_tensor_copy(bn, format::GgmlType::F32, {t.dim(1)}, std::move(bytes)).is_ok());
      Tensor bt;
      bt.ne = {t.dim(1)};
      bt.v.assign(bias.begin(), bias.end());
      w.t[bn] = bt;
    }
  }
  const std::string path = temp_path("tiny-dream-bias.gguf");
  ASSERT_TRUE(wr.write(path).is_ok());
  w.n_layer = (*g)->get_int("llada.block_count").value_or(0);
  w.n_head = (*g)->get_int("llada.attention.head_count").value_or(0);
  w.n_embd = (*g)->get_int("llada.embedding_length").value_or(0);
  w.eps = 1e-5;  // llada.attention.layer_norm_rms_epsilon, carried over
  ASSERT_EQ((*g)->get_int("llada.attention.head_count_kv").value_or(0), w.n_head);
  ASSERT_EQ((*g)->get_int("llada.rope.dimension_count").value_or(0), w.n_embd / w.n_head);

  auto m = models::load_model(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ASSERT_EQ((*m)->info().arch, "dream");
  const std::vector<int32_t>& ids = gc.prompt;
  const int64_t n = (int64_t)ids.size(), nv = (*m)->info().n_vocab;
  models::Context ctx = (*m)->new_context();
  auto st = ctx.new_state(n);
  std::vector<float> got((size_t)(n * nv));
  ThreadPool pool(2);
  ASSERT_TRUE(ctx.forward(*st, ids.data(), n, models::Logits::kAll, got.data(), &pool).is_ok());

  const std::vector<double> ref = reference(w, ids, true), nobias = reference(w, ids, false);
  double scale = 1, diff = 0, bias_effect = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    diff = std::max(diff, std::fabs((double)got[i] - ref[i]));
    bias_effect = std::max(bias_effect, std::fabs(nobias[i] - ref[i]));
  }
  const double bound = gc.tolerance * scale;
  std::printf("[ dream ] max |engine - reference| %.3g, bound %.3g, bias effect %.3g (scale %.3g)\n", diff, bound,
              bias_effect, scale);
  EXPECT_LE(diff, bound);
  EXPECT_GT(bias_effect, 20 * bound) << "the biases are too small to be tested";
}

}  // namespace
}  // namespace chimera::test
