// Head sizes as published files have them. llama.cpp's converter writes
// Phi-tiny-MoE without `key_length` / `value_length` and with
// `rope.dimension_count` = hidden / heads, although its heads are narrower
// (16 x 128 query rows for hidden 4096). Such files must load with the head
// size derived from the attention tensors, a rope count above the head meaning
// the whole head, and give exactly the logits of the same weights with the keys
// spelled out. Built here from the golden tiny models: half of the query heads
// are dropped (their rows of attn_q / attn_q.bias and their columns of
// attn_output), so head_dim (16) != embedding_length / head_count (32).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "format/gguf/gguf.h"
#include "models/context.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::test {
namespace {

using format::GgmlType;
using format::GgufValue;

size_t elem_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 4;
    case GgmlType::F16: return 2;
    default: return 0;
  }
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Narrowed {
  std::string spelled;    // head_count = head_count_kv, key/value_length and rope count written out
  std::string published;  // the keys dropped, rope count = embedding_length / head_count
};

// Keeps the first n_head query heads and n_head_kv key/value heads of every
// attention layer of `src` (F16/F32 tensors only). `arch` is the metadata prefix.
Narrowed narrow_heads(const std::string& src, const std::string& arch, int64_t n_head, int64_t n_head_kv,
                      int64_t head_dim, const std::string& tag) {
  auto g = format::GgufFile::open(src);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  const int64_t n_embd = (*g)->get_int(arch + ".embedding_length").value();
  const int64_t q_rows = n_head * head_dim, kv_rows = n_head_kv * head_dim;
  std::vector<std::vector<uint8_t>> keep;  // owns the sliced tensors until written
  auto write = [&](bool published) {
    format::GgufWriter w;
    for (const auto& [k, v] : (*g)->metadata()) {
      if (k == arch + ".attention.key_length" || k == arch + ".attention.value_length") continue;
      if (k == arch + ".rope.dimension_count") continue;
      if (k == arch + ".attention.head_count" || k == arch + ".attention.head_count_kv") {
        w.set(k, GgufValue::from_u32((uint32_t)(k == arch + ".attention.head_count" ? n_head : n_head_kv)));
        continue;
      }
      w.set(k, v);
    }
    if (published) {
      w.set(arch + ".rope.dimension_count", GgufValue::from_u32((uint32_t)(n_embd / n_head)));
    } else {
      w.set(arch + ".attention.key_length", GgufValue::from_u32((uint32_t)head_dim));
      w.set(arch + ".attention.value_length", GgufValue::from_u32((uint32_t)head_dim));
      w.set(arch + ".rope.dimension_count", GgufValue::from_u32((uint32_t)head_dim));
    }
    for (const auto& t : (*g)->tensors()) {
      const size_t eb = elem_bytes(t.type);
      const bool is_q = ends_with(t.name, ".attn_q.weight") || ends_with(t.name, ".attn_q.bias");
      const bool is_kv = ends_with(t.name, ".attn_k.weight") || ends_with(t.name, ".attn_k.bias") ||
                         ends_with(t.name, ".attn_v.weight") || ends_with(t.name, ".attn_v.bias");
      if (is_q || is_kv) {
        EXPECT_GT(eb, 0u) << t.name;
        const int64_t keep_rows = is_q ? q_rows : kv_rows;
        std::vector<int64_t> ne = t.ne;
        ne.back() = keep_rows;  // rows (2-D) or elements (bias): the first heads
        const size_t n = (size_t)(ne.size() == 2 ? ne[0] * keep_rows : keep_rows) * eb;
        keep.emplace_back(t.data, t.data + n);
        EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, keep.back().data(), n).is_ok());
      } else if (ends_with(t.name, ".attn_output.weight")) {
        EXPECT_GT(eb, 0u) << t.name;
        const int64_t cols = t.ne[0], rows = t.ne[1];
        std::vector<uint8_t> out((size_t)(rows * q_rows) * eb);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(out.data() + (size_t)(r * q_rows) * eb, t.data + (size_t)(r * cols) * eb, (size_t)q_rows * eb);
        keep.push_back(std::move(out));
        EXPECT_TRUE(w.add_tensor(t.name, t.type, {q_rows, rows}, keep.back().data(), keep.back().size()).is_ok());
      } else {
        EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
      }
    }
    const std::string path = temp_path(tag + (published ? "-published.gguf" : "-spelled.gguf"));
    EXPECT_TRUE(w.write(path).is_ok());
    return path;
  };
  Narrowed n;
  n.spelled = write(false);
  n.published = write(true);
  return n;
}

std::vector<float> all_logits(models::Model& m, int64_t n) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((int32_t)(1 + (37 * i) % (m.info().n_vocab - 1)));
  models::Context ctx = m.new_context();
  auto st = ctx.new_state(64);
  std::vector<float> out((size_t)(n * m.info().n_vocab));
  EXPECT_TRUE(ctx.forward(*st, ids.data(), n, models::Logits::kAll, out.data(), nullptr).is_ok());
  return out;
}

bool mentions(const std::vector<std::string>& notes, const std::string& needle) {
  for (const auto& s : notes)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

struct Case {
  const char* model;
  const char* arch;
  int64_t n_head, n_head_kv;  // after narrowing; head size stays 16
};

class HeadGeometry : public ::testing::TestWithParam<Case> {};

TEST_P(HeadGeometry, PublishedKeysGiveTheLogitsOfSpelledOutKeys) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Case c = GetParam();
  const Narrowed f = narrow_heads(shared + "/golden/models/" + c.model + ".gguf", c.arch, c.n_head, c.n_head_kv, 16, c.model);
  auto spelled = models::load_model(f.spelled);
  ASSERT_TRUE(spelled.is_ok()) << spelled.status().message();
  auto published = models::load_model(f.published);
  ASSERT_TRUE(published.is_ok()) << published.status().message();
  EXPECT_TRUE((*spelled)->info().derived.empty());
  // The load line says what was derived: the head size and the clamped rope count.
  const auto& notes = (*published)->info().derived;
  EXPECT_TRUE(mentions(notes, "head size 16 from blk.0.attn_q.weight")) << ::testing::PrintToString(notes);
  EXPECT_TRUE(mentions(notes, "rope.dimension_count 32 exceeds the head size 16")) << ::testing::PrintToString(notes);
  const std::vector<float> a = all_logits(**spelled, 7), b = all_logits(**published, 7);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
  // The narrowed model is a different model (the test would notice a no-op).
  auto orig = models::load_model(shared + "/golden/models/" + c.model + ".gguf");
  ASSERT_TRUE(orig.is_ok());
  const std::vector<float> o = all_logits(**orig, 7);
  float d = 0;
  for (size_t i = 0; i < o.size(); ++i) d = std::max(d, std::fabs(o[i] - a[i]));
  EXPECT_GT(d, 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Families, HeadGeometry,
                         ::testing::Values(Case{"tiny-phimoe-hf", "phimoe", 2, 2}, Case{"tiny-llama", "llama", 2, 1},
                                           Case{"tiny-llada", "llada", 2, 2}),
                         [](const auto& info) {
                           std::string s = info.param.arch;
                           return s;
                         });

// A derived value is still checked against every layer's tensors, and rows that
// are not whole heads are a clear error naming the tensor.
TEST(HeadGeometryErrors, InconsistentShapesNameTheTensor) {
  CHIMERA_REQUIRE_SHARED(shared);
  const Narrowed f = narrow_heads(shared + "/golden/models/tiny-phimoe-hf.gguf", "phimoe", 2, 2, 16, "phimoe-err");
  auto expect_error = [](const std::string& path, const std::string& needle) {
    auto m = models::load_model(path);
    ASSERT_FALSE(m.is_ok()) << path;
    EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
  };
  auto g = format::GgufFile::open(f.published);
  ASSERT_TRUE(g.is_ok());
  // 3 heads: 32 query rows are not a multiple of 3.
  {
    format::GgufWriter w;
    for (const auto& [k, v] : (*g)->metadata())
      w.set(k, k == "phimoe.attention.head_count" ? GgufValue::from_u32(3) : v);
    w.set("phimoe.attention.head_count_kv", GgufValue::from_u32(3));
    for (const auto& t : (*g)->tensors()) ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
    const std::string p = temp_path("phimoe-3heads.gguf");
    ASSERT_TRUE(w.write(p).is_ok());
    expect_error(p, "blk.0.attn_q.weight");
  }
  // Layer 1's query narrower than layer 0's: the derived size fails at layer 1.
  {
    format::GgufWriter w;
    for (const auto& [k, v] : (*g)->metadata()) w.set(k, v);
    std::vector<uint8_t> half;
    for (const auto& t : (*g)->tensors()) {
      if (t.name == "blk.1.attn_q.weight") {
        half.assign(t.data, t.data + t.n_bytes / 2);
        ASSERT_TRUE(w.add_tensor(t.name, t.type, {t.ne[0], t.ne[1] / 2}, half.data(), half.size()).is_ok());
      } else {
        ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
      }
    }
    const std::string p = temp_path("phimoe-layer1.gguf");
    ASSERT_TRUE(w.write(p).is_ok());
    expect_error(p, "blk.1.attn_q.weight");
  }
}

}  // namespace
}  // namespace chimera::test
