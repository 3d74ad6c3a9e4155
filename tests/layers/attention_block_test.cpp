// The attention block (layers/attention_block.h), the one attention of every
// family, on a small random GQA layer:
//  * several sequences in one call (one span each) give every sequence the
//    outputs and cache rows it gets alone — with f32 caches (a lone call
//    projects K/V straight into the cache, a multi-span call stores them from
//    scratch) and with f16 caches, 1 and 2 threads;
//  * a span's own config (RoPE factors) applies to that sequence only;
//  * a partial-canvas slice (masked diffusion: keys [0, n_kv) beyond the
//    slice, left in the cache by an earlier pass) reproduces the rows of the
//    full non-causal pass.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "layers/attention_block.h"

namespace chimera::layers {
namespace {

struct Layer {
  AttentionConfig c;
  AttentionWeights w;
  std::vector<float> wq, wk, wv, wo;
  explicit Layer(bool causal) {
    c.n_embd = 32, c.n_head = 4, c.n_head_kv = 2, c.head_dim = 8, c.head_dim_v = 8, c.causal = causal;
    c.rope.mode = kernels::RopeMode::kNeox;
    c.rope.n_rot = 8;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 0.3f);
    auto bind = [&](Linear& l, std::vector<float>& buf, int64_t out, int64_t in) {
      buf.resize((size_t)(out * in));
      for (float& x : buf) x = nd(rng);
      l.w = {format::GgmlType::F32, buf.data(), out, in, (size_t)in * sizeof(float)};
    };
    bind(w.wq, wq, c.n_head * c.head_dim, c.n_embd);
    bind(w.wk, wk, c.n_head_kv * c.head_dim, c.n_embd);
    bind(w.wv, wv, c.n_head_kv * c.head_dim_v, c.n_embd);
    bind(w.wo, wo, c.n_embd, c.n_head * c.head_dim_v);
  }
  std::unique_ptr<SequenceState> state(KvCacheTypes t) const {
    return std::make_unique<SequenceState>(std::vector<LayerStateSpec>{c.kv_spec()}, 64, t);
  }
};

std::vector<float> random_rows(int64_t n, int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x((size_t)(n * d));
  for (float& v : x) v = nd(rng);
  return x;
}

// One call over `spans`; h holds their rows; returns the output rows.
std::vector<float> run(const Layer& L, const std::vector<float>& h, int64_t rows, std::vector<AttentionSpan> spans,
                       ThreadPool* pool) {
  AttentionScratch s;
  s.reserve(L.c, rows);
  std::vector<float> out((size_t)(rows * L.c.n_embd));
  attention_forward(L.c, L.w, h.data(), rows, spans, 0, s, out.data(), pool);
  return out;
}

void expect_same_cache(SequenceState& a, SequenceState& b, int64_t n, const std::string& what) {
  const KvSpec& sp = a.kv(0)->spec();
  std::vector<float> xa((size_t)(n * sp.n_embd_k)), xb(xa.size());
  a.kv(0)->load_k(0, n, xa.data());
  b.kv(0)->load_k(0, n, xb.data());
  EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(float))) << what << " K";
  a.kv(0)->load_v(0, n, xa.data());
  b.kv(0)->load_v(0, n, xb.data());
  EXPECT_EQ(0, std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(float))) << what << " V";
}

TEST(AttentionBlock, FusedSpansMatchEachSequenceAlone) {
  const Layer L(true);
  const int64_t d = L.c.n_embd;
  const auto past_b = random_rows(4, d, 1), ha = random_rows(5, d, 2), hb = random_rows(3, d, 3);
  std::vector<float> h(ha);  // fused rows: A's 5 then B's 3
  h.insert(h.end(), hb.begin(), hb.end());
  for (KvCacheTypes t : {KvCacheTypes{}, KvCacheTypes{kernels::KvType::kF16, kernels::KvType::kF16}}) {
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      const std::string what = std::string("k ") + kernels::kv_type_name(t.k) + " threads " + std::to_string(threads);
      auto a = L.state(t), b = L.state(t), a1 = L.state(t), b1 = L.state(t);
      // B already holds 4 positions, written alone in both runs.
      for (SequenceState* s : {b.get(), b1.get()}) {
        run(L, past_b, 4, {{s, 0, 4, 0, 4}}, &pool);
        s->advance(4);
      }
      const auto fused = run(L, h, 8, {{a.get(), 0, 5, 0, 5}, {b.get(), 5, 3, 4, 7}}, &pool);
      const auto alone_a = run(L, ha, 5, {{a1.get(), 0, 5, 0, 5}}, &pool);
      const auto alone_b = run(L, hb, 3, {{b1.get(), 0, 3, 4, 7}}, &pool);
      EXPECT_EQ(0, std::memcmp(fused.data(), alone_a.data(), alone_a.size() * sizeof(float))) << what << " A";
      EXPECT_EQ(0, std::memcmp(fused.data() + 5 * d, alone_b.data(), alone_b.size() * sizeof(float))) << what << " B";
      expect_same_cache(*a, *a1, 5, what + " A");
      expect_same_cache(*b, *b1, 7, what + " B");
    }
  }
}

TEST(AttentionBlock, SpanConfigAppliesToItsSequenceOnly) {
  const Layer L(true);
  const int64_t d = L.c.n_embd;
  const std::vector<float> factors = {1.f, 2.f, 4.f, 8.f};  // n_rot / 2
  Layer L2(true);
  L2.c.rope.freq_factors = factors.data();
  const auto h = random_rows(6, d, 4);
  const std::vector<float> ha(h.begin(), h.begin() + 3 * d), hb(h.begin() + 3 * d, h.end());
  auto a = L.state({}), b = L.state({}), a1 = L.state({}), b1 = L.state({}), b0 = L.state({});
  const auto fused = run(L, h, 6, {{a.get(), 0, 3, 0, 3}, {b.get(), 3, 3, 0, 3, &L2.c}}, nullptr);
  const auto alone_a = run(L, ha, 3, {{a1.get(), 0, 3, 0, 3}}, nullptr);
  const auto alone_b = run(L2, hb, 3, {{b1.get(), 0, 3, 0, 3}}, nullptr);
  const auto plain_b = run(L, hb, 3, {{b0.get(), 0, 3, 0, 3}}, nullptr);
  const size_t bytes = (size_t)(3 * d) * sizeof(float);
  EXPECT_EQ(0, std::memcmp(fused.data(), alone_a.data(), bytes));
  EXPECT_EQ(0, std::memcmp(fused.data() + 3 * d, alone_b.data(), bytes));
  EXPECT_NE(0, std::memcmp(plain_b.data(), alone_b.data(), bytes)) << "the factors change nothing: no test";
}

TEST(AttentionBlock, PartialCanvasSliceReproducesTheFullPass) {
  const Layer L(false);  // non-causal: every row sees every key
  const int64_t d = L.c.n_embd, n = 8, p0 = 3, T = 3;
  const auto h = random_rows(n, d, 5);
  auto st = L.state({});
  const auto full = run(L, h, n, {{st.get(), 0, n, 0, n}}, nullptr);
  // Rows p0 .. p0+T-1 again, against the keys the full pass left at the other positions.
  const std::vector<float> slice(h.begin() + p0 * d, h.begin() + (p0 + T) * d);
  const auto part = run(L, slice, T, {{st.get(), 0, T, p0, n}}, nullptr);
  EXPECT_EQ(0, std::memcmp(part.data(), full.data() + p0 * d, (size_t)(T * d) * sizeof(float)));
  // Keys only up to the slice's end differ (the later positions are ignored).
  const auto short_kv = run(L, slice, T, {{st.get(), 0, T, p0, p0 + T}}, nullptr);
  EXPECT_NE(0, std::memcmp(short_kv.data(), full.data() + p0 * d, (size_t)(T * d) * sizeof(float)));
}

}  // namespace
}  // namespace chimera::layers
