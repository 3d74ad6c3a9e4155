// matmul against the scalar reference (kernels/ref/matmul_ref.h) on every ISA
// this CPU runs, for F32, F16 and BF16 weights.
//
// Tolerance (also stated in ref/matmul_ref.h): for every output
//   |y - y_ref| <= (ceil(k / 8) + 8) * 2^-24 * sum_k |w| |round_vd(x)|
// — the f32 summation bound for at least 8 interleaved lanes plus the final
// horizontal reduction. Exact checks: activation rounding (results that only
// come out right when x is rounded RNE to F16 first, or not rounded at all for
// BF16 weights), bit-identical
// results for 1 vs 2 threads and for a row computed alone (m == 1) vs inside a
// batch, weight_row_to_f32 on every F16/BF16 bit pattern, SIMD activation
// packers vs the scalar rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/ref/matmul_ref.h"
#include "kernels/matmul_pack.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

const GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};

size_t elem_bytes(GgmlType t) { return t == GgmlType::F32 ? 4 : 2; }

// Weights stored in `type` inside a byte buffer, optionally offset by one
// element from the allocation's alignment.
struct Weights {
  std::vector<uint8_t> bytes;
  WeightView view;
};

Weights make_weights(GgmlType type, int64_t rows, int64_t cols, const std::vector<float>& vals, bool misalign) {
  Weights w;
  const size_t eb = elem_bytes(type), off = misalign ? eb : 0;
  w.bytes.assign(off + (size_t)(rows * cols) * eb + 64, 0xAB);
  uint8_t* base = w.bytes.data() + off;
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (type == GgmlType::F32) {
      std::memcpy(base + i * 4, &vals[i], 4);
    } else {
      const uint16_t h = type == GgmlType::F16 ? f32_to_f16(vals[i]) : f32_to_bf16(vals[i]);
      std::memcpy(base + i * 2, &h, 2);
    }
  }
  w.view = WeightView{type, base, rows, cols, (size_t)cols * eb};
  return w;
}

enum class Values { kUniform, kZeros, kLarge, kMixedSigns };

float max_abs_for(GgmlType t, Values v) {
  if (v != Values::kLarge) return 1.0f;
  return t == GgmlType::F16 ? 6.0e4f : 1.0e15f;  // F16 activations must stay finite
}

std::vector<float> random_values(size_t n, float scale, Values v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (v) {
      case Values::kZeros: out[i] = 0.f; break;
      case Values::kMixedSigns: out[i] = (i % 2 ? -1.f : 1.f) * scale * (0.5f + 0.5f * std::fabs(u(rng))); break;
      default: out[i] = scale * u(rng); break;
    }
  }
  return out;
}

struct Case {
  GgmlType type;
  int64_t rows, cols, m;
  int64_t ldx_pad = 0, ldy_pad = 0;
  bool misalign = false;
  Values values = Values::kUniform;
  uint32_t seed = 1;
};

struct Operands {
  Weights w;
  std::vector<float> x_store;
  const float* x = nullptr;
  int64_t ldx = 0, ldy = 0;
  std::vector<double> ref, abs_dot;
};

Operands make_operands(const Case& c) {
  Operands o;
  const float scale = max_abs_for(c.type, c.values);
  o.w = make_weights(c.type, c.rows, c.cols, random_values((size_t)(c.rows * c.cols), scale, c.values, c.seed),
                     c.misalign);
  o.ldx = c.cols + c.ldx_pad;
  o.ldy = c.rows + c.ldy_pad;
  const size_t off = c.misalign ? 1 : 0;  // one float off the allocation alignment
  o.x_store = random_values(off + (size_t)(c.m * o.ldx), scale, c.values, c.seed * 7 + 3);
  o.x = o.x_store.data() + off;
  o.ref.assign((size_t)(c.m * o.ldy), 0);
  o.abs_dot.assign((size_t)(c.m * o.ldy), 0);
  ref::matmul_ref(o.w.view, o.x, c.m, o.ldx, o.ref.data(), o.ldy, o.abs_dot.data());
  return o;
}

double tolerance(int64_t k, double abs_dot) { return (double)((k + 7) / 8 + 8) * std::ldexp(1.0, -24) * abs_dot; }

constexpr float kSentinel = -12345.f;

std::vector<float> run(const Case& c, const Operands& o, ThreadPool* pool) {
  std::vector<float> y((size_t)(c.m * o.ldy), kSentinel);
  matmul(o.w.view, o.x, c.m, o.ldx, y.data(), o.ldy, pool);
  return y;
}

// Returns the number of mismatches (reports the first few).
int compare(const Case& c, const Operands& o, const std::vector<float>& y) {
  int bad = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t r = 0; r < o.ldy; ++r) {
      const size_t at = (size_t)(i * o.ldy + r);
      bool ok;
      double tol = 0;
      if (r >= c.rows) {
        ok = y[at] == kSentinel;  // outputs beyond rows must not be written
      } else {
        tol = tolerance(c.cols, o.abs_dot[at]);
        ok = std::fabs((double)y[at] - o.ref[at]) <= tol;
      }
      if (!ok && ++bad <= 3) {
        ADD_FAILURE() << ggml_type_name(c.type) << " isa=" << isa_name(active_isa()) << " rows=" << c.rows
                      << " k=" << c.cols << " m=" << c.m << " ldx+" << c.ldx_pad << " misalign=" << c.misalign
                      << " at (i=" << i << ", r=" << r << "): got " << y[at] << " want " << o.ref[at]
                      << " tol " << tol;
      }
    }
  }
  return bad;
}

ThreadPool& pool2() {
  static ThreadPool p(2);
  return p;
}

// More threads than cores: the guided schedule's chunk bounds (matmul.cpp,
// GuidedJob) for T = 3 and 5 must still cover every row exactly once.
ThreadPool& pool_n(int n) {
  static ThreadPool p3(3), p5(5);
  return n == 3 ? p3 : p5;
}

const int64_t kCols[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4096};
const int64_t kRowsSweep[] = {1, 2, 3, 5, 16, 17, 33, 100};
const int64_t kMs[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 33};

class MatmulTypeTest : public ::testing::TestWithParam<GgmlType> {};

// Full shape sweep; layout variants (ldx > k, misaligned x and w, ldy > rows)
// rotate over the shapes so that each appears with many shapes.
TEST_P(MatmulTypeTest, ShapeSweepMatchesReference) {
  const GgmlType type = GetParam();
  const std::vector<Isa> isas = available_isas();
  int cases = 0, bad = 0;
  uint32_t seed = 1;
  for (int64_t k : kCols) {
    for (int64_t rows : kRowsSweep) {
      for (int64_t m : kMs) {
        const int variant = (int)(seed % 4);
        Case c{type, rows, k, m};
        c.ldx_pad = variant & 1 ? 3 : 0;
        c.misalign = variant & 2;
        c.ldy_pad = variant == 3 ? 2 : 0;
        c.seed = seed++;
        const Operands o = make_operands(c);
        for (Isa isa : isas) {
          ScopedIsa scoped(isa);
          bad += compare(c, o, run(c, o, &pool2()));
          ++cases;
        }
        if (bad > 20) FAIL() << "too many failures";
      }
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(cases, 1000);
}

TEST_P(MatmulTypeTest, ValueRanges) {
  const GgmlType type = GetParam();
  for (Values v : {Values::kZeros, Values::kLarge, Values::kMixedSigns}) {
    for (int64_t k : {1, 17, 64, 129, 1000, 4096}) {
      for (int64_t m : {1, 3, 8}) {
        Case c{type, 19, k, m};
        c.values = v;
        c.seed = (uint32_t)(k * 31 + m);
        c.misalign = k % 2;
        const Operands o = make_operands(c);
        for (Isa isa : available_isas()) {
          ScopedIsa scoped(isa);
          const std::vector<float> y = run(c, o, &pool2());
          EXPECT_EQ(compare(c, o, y), 0);
          if (v == Values::kZeros) {
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t r = 0; r < c.rows; ++r) ASSERT_EQ(y[(size_t)(i * o.ldy + r)], 0.0f);
            }
          }
        }
      }
    }
  }
}

// k == 0: every output is an empty sum.
TEST_P(MatmulTypeTest, EmptyDotIsZero) {
  const GgmlType type = GetParam();
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    WeightView w{type, nullptr, 5, 0, 0};
    std::vector<float> x(3, 1.f), y(15, kSentinel);
    matmul(w, x.data(), 3, 1, y.data(), 5, nullptr);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST_P(MatmulTypeTest, IdenticalAcrossThreadCountsAndBatching) {
  const GgmlType type = GetParam();
  ThreadPool pool1(1);
  for (int64_t k : {17, 129, 1000, 4096}) {
    for (int64_t rows : {33, 100, 301}) {
      Case c{type, rows, k, 33};
      c.ldx_pad = 5;
      c.seed = (uint32_t)(k + rows);
      const Operands o = make_operands(c);
      for (Isa isa : available_isas()) {
        ScopedIsa scoped(isa);
        SCOPED_TRACE(std::string(isa_name(isa)) + " k=" + std::to_string(k) + " rows=" + std::to_string(rows));
        const std::vector<float> y1 = run(c, o, &pool1);
        const std::vector<float> y2 = run(c, o, &pool2());
        const std::vector<float> y0 = run(c, o, nullptr);
        EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << "1 vs 2 threads";
        EXPECT_EQ(std::memcmp(y1.data(), y0.data(), y1.size() * 4), 0) << "pool vs no pool";
        for (int n : {3, 5}) {
          const std::vector<float> yn = run(c, o, &pool_n(n));
          EXPECT_EQ(std::memcmp(y1.data(), yn.data(), y1.size() * 4), 0) << "1 vs " << n << " threads";
        }
        // Every row alone (decode), and a few sub-batches, must equal its batch row.
        std::vector<float> single(rows);
        for (int64_t i = 0; i < c.m; ++i) {
          matmul(o.w.view, o.x + i * o.ldx, 1, o.ldx, single.data(), rows, &pool2());
          ASSERT_EQ(std::memcmp(single.data(), y1.data() + i * o.ldy, rows * 4), 0) << "row " << i;
        }
        for (int64_t sub : {2, 5, 7}) {
          std::vector<float> ys((size_t)(sub * rows));
          matmul(o.w.view, o.x + 3 * o.ldx, sub, o.ldx, ys.data(), rows, &pool1);
          for (int64_t i = 0; i < sub; ++i) {
            ASSERT_EQ(std::memcmp(ys.data() + i * rows, y1.data() + (i + 3) * o.ldy, rows * 4), 0)
                << "sub-batch " << sub << " row " << i;
          }
        }
      }
    }
  }
}

// The guided schedule (matmul.cpp, GuidedJob) on shapes whose tail chunks
// are many 16-row units wide: every row computed exactly once for 2, 3 and 5
// threads (a lost or repeated chunk shows as a sentinel or a changed value).
TEST(MatmulSchedule, TailChunksCoverEveryRowOnce) {
  for (int64_t rows : {4099, 20000}) {
    for (int64_t m : {1, 3}) {
      Case c{GgmlType::F32, rows, 64, m};
      c.seed = (uint32_t)(rows + m);
      const Operands o = make_operands(c);
      SCOPED_TRACE("rows=" + std::to_string(rows) + " m=" + std::to_string(m));
      const std::vector<float> y0 = run(c, o, nullptr);
      for (const float v : y0) ASSERT_NE(v, kSentinel);
      EXPECT_EQ(std::memcmp(y0.data(), run(c, o, &pool2()).data(), y0.size() * 4), 0) << "2 threads";
      for (int n : {3, 5}) {
        EXPECT_EQ(std::memcmp(y0.data(), run(c, o, &pool_n(n)).data(), y0.size() * 4), 0) << n << " threads";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulTypeTest, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return ggml_type_name(info.param); });

// Runs y = W x for one row of W and m activation rows on every ISA and returns
// per-ISA outputs, for the exact rounding checks below.
std::vector<std::vector<float>> run_all_isas(GgmlType type, const std::vector<float>& w_vals, int64_t k,
                                             const std::vector<float>& x, int64_t m) {
  const Weights w = make_weights(type, 1, k, w_vals, false);
  std::vector<std::vector<float>> out;
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    std::vector<float> y((size_t)m);
    matmul(w.view, x.data(), m, k, y.data(), 1, nullptr);
    out.push_back(y);
  }
  return out;
}

// F16 weights round activations to F16 (RNE) before the dot, like llama.cpp.
// 1 + 2^-11 is a tie between 1 and 1 + 2^-10 and goes to 1 (even); 1 + 3 * 2^-11
// goes up to 1 + 2^-9. With w = 2048 every product and partial sum is exact, so
// a kernel that skipped the rounding (or rounded differently) misses by >= 1.
TEST(MatmulRounding, F16ActivationsRoundToNearestEven) {
  for (int64_t k : {1, 7, 16, 37, 100}) {
    std::vector<float> w((size_t)k, 2048.f), x((size_t)(2 * k));
    for (int64_t j = 0; j < k; ++j) {
      x[j] = 1.f + std::ldexp(1.f, -11);
      x[k + j] = 1.f + 3 * std::ldexp(1.f, -11);
    }
    for (const auto& y : run_all_isas(GgmlType::F16, w, k, x, 2)) {
      EXPECT_EQ(y[0], 2048.f * (float)k) << "k=" << k;
      EXPECT_EQ(y[1], (2048.f + 4.f) * (float)k) << "k=" << k;
      EXPECT_NE(y[0], (float)(2048.0 * k * (1 + std::ldexp(1.0, -11))));  // the unrounded value
    }
  }
  // Activations beyond the F16 range become inf, as in llama.cpp.
  for (const auto& y : run_all_isas(GgmlType::F16, {1.f}, 1, {70000.f}, 1)) EXPECT_EQ(y[0], INFINITY);
}

// BF16 weights multiply exact f32 activations: 1 + 2^-8 (a BF16 tie, which
// rounding would turn into 1) and 1 + 2^-20 keep every bit; w = 256.
TEST(MatmulRounding, BF16ActivationsAreExact) {
  for (int64_t k : {1, 7, 16, 33, 100}) {
    std::vector<float> w((size_t)k, 256.f), x((size_t)(2 * k));
    for (int64_t j = 0; j < k; ++j) {
      x[j] = 1.f + std::ldexp(1.f, -8);
      x[k + j] = 1.f + std::ldexp(1.f, -20);
    }
    for (const auto& y : run_all_isas(GgmlType::BF16, w, k, x, 2)) {
      EXPECT_EQ(y[0], (256.f + 1.f) * (float)k) << "k=" << k;
      EXPECT_EQ(y[1], (256.f + std::ldexp(1.f, -12)) * (float)k) << "k=" << k;
    }
  }
}

// F32 weights take activations unrounded.
TEST(MatmulRounding, F32ActivationsUnchanged) {
  const float x0 = 1.f + std::ldexp(1.f, -20);
  for (const auto& y : run_all_isas(GgmlType::F32, {1.f}, 1, {x0}, 1)) EXPECT_EQ(y[0], x0);
}

// Every ISA's activation packer must equal the scalar RNE rounding bit for bit
// (NaN inputs only need to stay NaN).
TEST(MatmulPack, PackersMatchScalarRounding) {
  std::vector<float> x = {0.f, -0.f, 1.f, -1.f, 65504.f, 65519.f, 65520.f, -70000.f, 1e-8f, -3e-5f, 6e-8f, 1e-40f,
                          INFINITY, -INFINITY, NAN, 3.4e38f, 1.f + std::ldexp(1.f, -8), 1.f + std::ldexp(1.f, -11)};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  while (x.size() < 1000) x.push_back(f32_from_bits(bits(rng)));
  for (GgmlType type : {GgmlType::F16}) {  // the only float type with an activation packer
    std::vector<float> want(x.size());
    ref::round_activation_ref(type, x.data(), want.data(), (int64_t)x.size());
    for (Isa isa : available_isas()) {
      const MatmulKernel* kern = matmul_kernel(type, isa);
      ASSERT_NE(kern, nullptr);
      ASSERT_NE(kern->pack_act, nullptr) << kern->name;
      for (size_t n : {x.size(), (size_t)13}) {  // full vectors + scalar tail
        std::vector<uint8_t> buf(kern->act_bytes((int64_t)n));
        kern->pack_act(x.data(), (int64_t)n, buf.data());
        for (size_t j = 0; j < n; ++j) {
          float got;
          if (kern->act_layout == GgmlType::F32) {
            std::memcpy(&got, buf.data() + j * 4, 4);
          } else {
            ASSERT_EQ(kern->act_layout, type);
            uint16_t h;
            std::memcpy(&h, buf.data() + j * 2, 2);
            got = type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
          }
          if (std::isnan(want[j])) {
            EXPECT_TRUE(std::isnan(got)) << kern->name << " j=" << j;
          } else {
            EXPECT_EQ(bits_from_f32(got), bits_from_f32(want[j])) << kern->name << " x=" << x[j];
          }
        }
        // The f32 + f16 layout's second copy holds the same values as f16.
        if (kern->act_bytes == &act_bytes_f32_f16) {
          ASSERT_EQ(type, GgmlType::F16);
          for (size_t j = 0; j < n; ++j) {
            uint16_t h;
            std::memcpy(&h, buf.data() + act_f16_copy_offset((int64_t)n) + j * 2, 2);
            if (std::isnan(want[j])) {
              EXPECT_TRUE(std::isnan(f16_to_f32(h))) << kern->name << " j=" << j;
            } else {
              EXPECT_EQ(h, f32_to_f16(want[j])) << kern->name << " x=" << x[j];
            }
          }
        }
      }
    }
  }
}

TEST(MatmulRowToF32, ExactForEveryF16AndBF16Pattern) {
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16}) {
    std::vector<uint16_t> h(65536);
    for (uint32_t i = 0; i < 65536; ++i) h[i] = (uint16_t)i;
    const int64_t cols = 4096;
    const WeightView w{type, h.data(), 16, cols, (size_t)cols * 2};
    std::vector<float> out(cols);
    for (int64_t r = 0; r < 16; ++r) {
      weight_row_to_f32(w, r, out.data());
      for (int64_t j = 0; j < cols; ++j) {
        const uint16_t v = h[r * cols + j];
        const float want = type == GgmlType::F16 ? f16_to_f32(v) : bf16_to_f32(v);
        ASSERT_EQ(bits_from_f32(out[j]), bits_from_f32(want)) << ggml_type_name(type) << " bits " << v;
      }
    }
  }
  std::vector<float> f = {1.5f, -0.f, 3e38f, 1e-45f};
  const WeightView w{GgmlType::F32, f.data(), 2, 2, 8};
  std::vector<float> out(2);
  weight_row_to_f32(w, 1, out.data());
  EXPECT_EQ(std::memcmp(out.data(), f.data() + 2, 8), 0);
}

// Every kernel's in-register F16 -> f32 weight conversion is exact: with
// one-hot activations each output is a single weight, for all finite F16 bit
// patterns (inf/NaN would turn the 0 * w terms into NaN, so they are checked
// separately with all-ones activations).
TEST(MatmulWeightConversion, F16WeightPatternsExactInKernels) {
  const int64_t k = 64, rows = 65536 / k;
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = ((i >> 10) & 0x1f) == 0x1f ? 0 : (uint16_t)i;
  const WeightView w{GgmlType::F16, h.data(), rows, k, (size_t)k * 2};
  std::vector<float> x((size_t)(k * k), 0.f);
  for (int64_t i = 0; i < k; ++i) x[(size_t)(i * k + i)] = 1.f;
  for (Isa isa : available_isas()) {
    ScopedIsa scoped(isa);
    std::vector<float> y((size_t)(k * rows));
    matmul(w, x.data(), k, k, y.data(), rows, &pool2());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t v = h[(size_t)(r * k + i)];
        ASSERT_EQ(y[(size_t)(i * rows + r)], f16_to_f32(v)) << isa_name(isa) << " bits " << v;
      }
    }
    // inf / NaN weights (at a SIMD-body and a tail position) with all-ones x.
    for (int64_t kk : {1, 17}) {
      std::vector<uint16_t> wi((size_t)(3 * kk), 0);
      const uint16_t special[3] = {0x7c00, 0xfc00, 0x7e00};
      for (int r = 0; r < 3; ++r) wi[(size_t)(r * kk + kk - 1)] = special[r];
      const WeightView ws{GgmlType::F16, wi.data(), 3, kk, (size_t)kk * 2};
      std::vector<float> ones((size_t)kk, 1.f), ys(3);
      matmul(ws, ones.data(), 1, kk, ys.data(), 3, nullptr);
      EXPECT_EQ(ys[0], INFINITY) << isa_name(isa);
      EXPECT_EQ(ys[1], -INFINITY) << isa_name(isa);
      EXPECT_TRUE(std::isnan(ys[2])) << isa_name(isa);
    }
  }
}

TEST(MatmulTraits, TableEntries) {
  EXPECT_EQ(weight_type_traits(GgmlType::F32)->vec_dot_type, GgmlType::F32);
  EXPECT_EQ(weight_type_traits(GgmlType::F16)->vec_dot_type, GgmlType::F16);
  EXPECT_EQ(weight_type_traits(GgmlType::BF16)->vec_dot_type, GgmlType::F32);
  for (GgmlType t : kTypes) {
    EXPECT_TRUE(matmul_supports(t));
    EXPECT_TRUE(check_matmul_type(t).is_ok());
    // act_from_f32 writes the vec_dot type with the reference rounding.
    const std::vector<float> x = {1.f + std::ldexp(1.f, -9), -2.5f, 1e-3f, 70000.f};
    std::vector<float> want(x.size());
    ref::round_activation_ref(t, x.data(), want.data(), 4);
    std::vector<uint8_t> buf(16);
    weight_type_traits(t)->act_from_f32(x.data(), buf.data(), 4);
    for (size_t j = 0; j < x.size(); ++j) {
      float got;
      uint16_t h;
      std::memcpy(&h, buf.data() + j * 2, 2);
      if (weight_type_traits(t)->vec_dot_type == GgmlType::F32) std::memcpy(&got, buf.data() + j * 4, 4);
      else got = f16_to_f32(h);
      EXPECT_EQ(got, want[j]) << ggml_type_name(t) << " j=" << j;
    }
    for (Isa isa : available_isas()) {
      const MatmulKernel* k = matmul_kernel(t, isa);
      ASSERT_NE(k, nullptr);
      EXPECT_NE(k->gemm, nullptr);
      EXPECT_NE(k->name, nullptr);
    }
  }
  for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::IQ1_S, GgmlType::I32}) {
    EXPECT_FALSE(matmul_supports(t));
    EXPECT_EQ(check_matmul_type(t).code(), StatusCode::kUnsupported);
    EXPECT_EQ(weight_type_traits(t), nullptr);
  }
  const std::vector<Isa> isas = available_isas();
  if (std::find(isas.begin(), isas.end(), Isa::kAvx512Vnni) != isas.end()) {
    EXPECT_STREQ(matmul_kernel(GgmlType::BF16, Isa::kAvx512Vnni)->name, "gemm_bf16_f32_avx512");
    EXPECT_STREQ(matmul_kernel(GgmlType::F16, Isa::kAvx512Vnni)->name, "gemm_f16_f16_avx512");
  }
}

}  // namespace
}  // namespace chimera::kernels
