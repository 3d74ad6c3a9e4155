// Recurrent and hybrid models (mamba, mamba2, granitehybrid) on their golden
// fixtures, beyond the generic golden test:
//  * the max |diff| against the reference for every case and mode, printed for
//    the record (the bound is asserted by golden_test.cpp as well);
//  * two sequences decoded in alternating steps on two states give exactly the
//    logits each gives alone (no state leaks between sequences);
//  * chunked prefill (1, 3, 7 tokens per call) leaves the same recurrent state
//    and KV rows as one batch, and a long prompt that takes the chunked SSD
//    path agrees with token-by-token decoding (sequential scan);
//  * state semantics: fresh/reset states are zero, truncate() refuses to roll a
//    recurrent state back, snapshot/restore and fork reproduce logits exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "golden_case.h"
#include "models/context.h"
#include "models/model.h"

namespace chimera::test {
namespace {

const char* kCases[] = {"tiny-mamba", "tiny-mamba-long", "tiny-mamba2", "tiny-mamba2-long", "tiny-granitehybrid",
                        "tiny-granitehybrid-long"};
const char* kModels[] = {"tiny-mamba", "tiny-mamba2", "tiny-granitehybrid"};

std::unique_ptr<models::Model> load(const std::string& shared, const std::string& name) {
  auto m = models::load_model(shared + "/golden/models/" + name + ".gguf");
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// Logits of every token of seq, fed `chunk` tokens per call (0 = one call).
std::vector<float> run(models::Model& m, const std::vector<int32_t>& seq, int64_t chunk, ThreadPool* pool,
                       layers::SequenceState* st_out = nullptr) {
  const int64_t n = (int64_t)seq.size(), nv = m.info().n_vocab;
  models::Context ctx = m.new_context();
  auto st = ctx.new_state(std::max<int64_t>(512, n + 8));
  std::vector<float> rows((size_t)(n * nv));
  if (chunk <= 0) chunk = n;
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t c = std::min(chunk, n - i);
    EXPECT_TRUE(ctx.forward(*st, seq.data() + i, c, models::Logits::kAll, rows.data() + i * nv, pool).is_ok());
  }
  if (st_out) {
    EXPECT_TRUE(st_out->copy_from(*st).is_ok());
  }
  return rows;
}

float max_diff(const float* a, const float* b, size_t n) {
  float d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::isnan(a[i] - b[i]) ? INFINITY : std::fabs(a[i] - b[i]));
  return d;
}

TEST(HybridGolden, ReportsMaxDiffPerCaseAndMode) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : kCases) {
    GoldenCase gc;
    ASSERT_TRUE(load_golden(shared + "/golden", name, &gc)) << name;
    auto m = models::load_model(gc.model_path);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    std::vector<int32_t> seq = gc.prompt;
    seq.insert(seq.end(), gc.greedy.begin(), gc.greedy.end() - 1);
    const int64_t np = (int64_t)gc.prompt.size(), ng = (int64_t)gc.greedy.size(), nv = gc.n_vocab;
    const float bound = gc.tolerance * gc.scale();
    float worst_all = 0;
    std::string line;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int64_t chunk : {0, 1, 3}) {
        auto rows = run(**m, seq, chunk, &pool);
        float worst = 0;
        for (int64_t i = 0; i < np; ++i)
          worst = std::max(worst, max_diff(rows.data() + i * nv, gc.prompt_logits.data() + i * nv, (size_t)nv));
        for (int64_t j = 1; j < ng; ++j)
          worst = std::max(worst, max_diff(rows.data() + (np - 1 + j) * nv, gc.gen_logits.data() + j * nv, (size_t)nv));
        worst_all = std::max(worst_all, worst);
        char buf[64];
        std::snprintf(buf, sizeof buf, " t%d/%s %.3g", threads, chunk == 0 ? "batch" : chunk == 1 ? "step" : "chunk3",
                      worst);
        line += buf;
      }
    }
    std::printf("[golden %s] bound %.4g (tol %.3g x scale %.3g):%s\n", name, bound, gc.tolerance, gc.scale(),
                line.c_str());
    EXPECT_LE(worst_all, bound) << name;
  }
}

TEST(HybridState, InterleavedSequencesDoNotLeak) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    const int64_t nv = m->info().n_vocab;
    std::vector<int32_t> a, b;
    for (int i = 0; i < 24; ++i) {
      a.push_back((i * 37 + 5) % (int32_t)nv);
      b.push_back((i * 101 + 900) % (int32_t)nv);
    }
    ThreadPool pool(2);
    const auto ra = run(*m, a, 1, &pool), rb = run(*m, b, 1, &pool);
    models::Context ctx = m->new_context();
    auto sa = ctx.new_state(64), sb = ctx.new_state(64);
    std::vector<float> la((size_t)nv), lb((size_t)nv);
    // Prefill a in one batch, b in chunks, then alternate single steps.
    std::vector<float> pa((size_t)(4 * nv)), pb((size_t)(4 * nv));
    ASSERT_TRUE(ctx.forward(*sa, a.data(), 4, models::Logits::kAll, pa.data(), &pool).is_ok());
    ASSERT_TRUE(ctx.forward(*sb, b.data(), 2, models::Logits::kAll, pb.data(), &pool).is_ok());
    ASSERT_TRUE(ctx.forward(*sb, b.data() + 2, 2, models::Logits::kAll, pb.data() + 2 * nv, &pool).is_ok());
    EXPECT_EQ(max_diff(pa.data(), ra.data(), pa.size()), 0.f);
    EXPECT_EQ(max_diff(pb.data(), rb.data(), pb.size()), 0.f);
    for (size_t i = 4; i < a.size(); ++i) {
      ASSERT_TRUE(ctx.forward(*sa, &a[i], 1, models::Logits::kLast, la.data(), &pool).is_ok());
      ASSERT_TRUE(ctx.forward(*sb, &b[i], 1, models::Logits::kLast, lb.data(), &pool).is_ok());
      ASSERT_EQ(max_diff(la.data(), ra.data() + i * nv, (size_t)nv), 0.f) << "seq a step " << i;
      ASSERT_EQ(max_diff(lb.data(), rb.data() + i * nv, (size_t)nv), 0.f) << "seq b step " << i;
    }
  }
}

// Compares every recurrent state and the KV rows of two states.
float state_diff(layers::SequenceState& x, layers::SequenceState& y, bool with_kv = true) {
  float d = 0;
  for (size_t l = 0; l < x.n_layers(); ++l) {
    if (auto* r = x.recurrent(l)) {
      auto* q = y.recurrent(l);
      d = std::max(d, max_diff(r->conv(), q->conv(), (size_t)(r->spec().conv_channels * r->spec().conv_rows)));
      d = std::max(d, max_diff(r->ssm(), q->ssm(), (size_t)r->spec().ssm_floats));
    }
    if (auto* k = x.kv(l); k && with_kv) {
      auto* k2 = y.kv(l);
      const int64_t n = x.n_past(), w = std::max(k->spec().n_embd_k, k->spec().n_embd_v);
      std::vector<float> a((size_t)(n * w)), b((size_t)(n * w));  // rows as f32 (the cache is paged)
      k->load_k(0, n, a.data());
      k2->load_k(0, n, b.data());
      d = std::max(d, max_diff(a.data(), b.data(), (size_t)(n * k->spec().n_embd_k)));
      k->load_v(0, n, a.data());
      k2->load_v(0, n, b.data());
      d = std::max(d, max_diff(a.data(), b.data(), (size_t)(n * k->spec().n_embd_v)));
    }
  }
  return d;
}

TEST(HybridState, ChunkedPrefillGivesTheSameStateAsOneBatch) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    std::vector<int32_t> seq;
    for (int i = 0; i < 40; ++i) seq.push_back((i * 53 + 11) % (int32_t)m->info().n_vocab);
    ThreadPool pool(2);
    auto s0 = m->new_state(512);
    const auto r0 = run(*m, seq, 0, &pool, s0.get());
    for (int64_t chunk : {1, 3, 7}) {
      auto s1 = m->new_state(512);
      const auto r1 = run(*m, seq, chunk, &pool, s1.get());
      EXPECT_EQ(s1->n_past(), (int64_t)seq.size());
      // Short prompts take the sequential scan in every mode: identical bits.
      EXPECT_EQ(state_diff(*s0, *s1), 0.f) << "chunk " << chunk;
      EXPECT_EQ(max_diff(r0.data(), r1.data(), r0.size()), 0.f) << "chunk " << chunk;
    }
  }
}

TEST(HybridState, LongPromptSsdPathAgreesWithStepByStep) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : {"tiny-mamba2", "tiny-granitehybrid"}) {
    SCOPED_TRACE(name);
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    std::vector<int32_t> seq;
    for (int i = 0; i < 300; ++i) seq.push_back((i * 29 + 3) % (int32_t)m->info().n_vocab);
    ThreadPool pool(2);
    auto sb = m->new_state(512), ss = m->new_state(512);
    const auto rb = run(*m, seq, 0, &pool, sb.get());  // ubatches of 256 + 44: SSD for the first
    const auto rs = run(*m, seq, 1, &pool, ss.get());  // sequential scan
    float scale = 1;
    for (float v : rs) scale = std::max(scale, std::fabs(v));
    const float dl = max_diff(rb.data(), rs.data(), rb.size()), ds = state_diff(*sb, *ss, false);
    float smax = 1;
    for (size_t l = 0; l < ss->n_layers(); ++l)
      if (auto* r = ss->recurrent(l))
        for (int64_t i = 0; i < r->spec().ssm_floats; ++i) smax = std::max(smax, std::fabs(r->ssm()[i]));
    // Rows (tokens) whose logits differ by more than 1e-3 of the scale.
    const int64_t nv = m->info().n_vocab, n_rows = (int64_t)rb.size() / nv;
    int64_t off_rows = 0;
    for (int64_t r = 0; r < n_rows; ++r)
      off_rows += max_diff(rb.data() + r * nv, rs.data() + r * nv, (size_t)nv) > 1e-3f * scale;
    std::printf("[ssd-in-model %s] 300 tokens: max|dlogit| %.3g (scale %.3g), rows off %lld / %lld, "
                "max|d(conv,ssm state)| %.3g (max|h| %.3g)\n",
                name, dl, scale, (long long)off_rows, (long long)n_rows, ds, smax);
    // The SSD kernel itself agrees to ~1e-6 relative (kernels/ssm_test.cpp; in
    // this model too, checked against ref::ssd_chunked call by call); in the
    // model, activations are rounded to F16 before each F16 matmul, so a
    // last-bit difference can flip one F16 rounding (~5e-4 relative). The MoE
    // of tiny-granitehybrid (top-2 of 4 experts) can also flip an expert choice
    // on a near-tie, which changes that token's row by O(1): allow 2% of rows.
    EXPECT_LE(off_rows, n_rows / 50);
    if (std::string(name) == "tiny-mamba2") {
      EXPECT_LE(dl, 1e-3f * scale);  // no routing
    }
    EXPECT_LE(ds, 1e-3f * smax);
  }
}

TEST(HybridState, ResetTruncateSnapshotAndFork) {
  CHIMERA_REQUIRE_SHARED(shared);
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    auto m = load(shared, name);
    ASSERT_TRUE(m);
    const int64_t nv = m->info().n_vocab;
    const std::vector<int32_t> p = {5, 17, 300, 42, 7, 99}, q = {11, 12, 13};
    ThreadPool pool(1);
    models::Context ctx = m->new_context();
    auto st = ctx.new_state(64);
    EXPECT_TRUE(st->has_recurrent());
    std::vector<float> l1((size_t)nv), l2((size_t)nv), l3((size_t)nv);
    ASSERT_TRUE(ctx.forward(*st, p.data(), 6, models::Logits::kLast, l1.data(), &pool).is_ok());

    // Recurrent state cannot be rolled back; truncating to n_past is a no-op.
    EXPECT_FALSE(st->truncate(3).is_ok());
    EXPECT_FALSE(st->truncate(0).is_ok());
    EXPECT_TRUE(st->truncate(6).is_ok());
    EXPECT_EQ(st->n_past(), 6);

    // Snapshot, continue, restore, continue again: identical logits.
    auto snap = st->snapshot();
    ASSERT_TRUE(ctx.forward(*st, q.data(), 3, models::Logits::kLast, l2.data(), &pool).is_ok());
    ASSERT_TRUE(st->copy_from(*snap).is_ok());
    EXPECT_EQ(st->n_past(), 6);
    ASSERT_TRUE(ctx.forward(*st, q.data(), 3, models::Logits::kLast, l3.data(), &pool).is_ok());
    EXPECT_EQ(max_diff(l2.data(), l3.data(), (size_t)nv), 0.f);

    // Fork into a fresh state.
    auto fork = ctx.new_state(64);
    ASSERT_TRUE(fork->copy_from(*snap).is_ok());
    ASSERT_TRUE(ctx.forward(*fork, q.data(), 3, models::Logits::kLast, l3.data(), &pool).is_ok());
    EXPECT_EQ(max_diff(l2.data(), l3.data(), (size_t)nv), 0.f);

    // reset() starts a new sequence: zero state, same logits as a fresh state.
    st->reset();
    EXPECT_EQ(st->n_past(), 0);
    for (size_t l = 0; l < st->n_layers(); ++l)
      if (auto* r = st->recurrent(l)) {
        for (int64_t i = 0; i < r->spec().ssm_floats; ++i) ASSERT_EQ(r->ssm()[i], 0.f);
        for (int64_t i = 0; i < r->spec().conv_channels * r->spec().conv_rows; ++i) ASSERT_EQ(r->conv()[i], 0.f);
      }
    ASSERT_TRUE(ctx.forward(*st, p.data(), 6, models::Logits::kLast, l3.data(), &pool).is_ok());
    EXPECT_EQ(max_diff(l1.data(), l3.data(), (size_t)nv), 0.f);

    // Shapes must match to copy.
    auto other = models::load_model(shared + "/models/stories260K.gguf");
    ASSERT_TRUE(other.is_ok());
    auto os = (*other)->new_state(64);
    EXPECT_FALSE(st->copy_from(*os).is_ok());
  }
}

// Missing tensors, wrong shapes and bad SSM metadata are errors naming the culprit.
TEST(HybridLoad, BadFilesAreClearErrors) {
  CHIMERA_REQUIRE_SHARED(shared);
  struct Edit {
    const char* model;
    const char* tensor;  // dropped (or reshaped when reshape)
    bool reshape;
    const char* key;     // metadata override (u32 value 3) or null
    const char* expect;  // substring of the error
  };
  const Edit edits[] = {
      {"tiny-mamba", "blk.1.ssm_a", false, nullptr, "blk.1.ssm_a"},
      {"tiny-mamba", "blk.0.ssm_conv1d.weight", true, nullptr, "blk.0.ssm_conv1d.weight"},
      {"tiny-mamba2", "blk.1.ssm_norm.weight", false, nullptr, "blk.1.ssm_norm.weight"},
      {"tiny-mamba2", "", false, "mamba2.ssm.group_count", "group_count"},
      {"tiny-granitehybrid", "blk.2.ssm_d", false, nullptr, "blk.2.ssm_d"},
      {"tiny-granitehybrid", "blk.3.attn_k.weight", false, nullptr, "blk.3.attn_k.weight"},
      {"tiny-granitehybrid", "blk.0.ffn_up_exps.weight", true, nullptr, "blk.0.ffn_up_exps.weight"},
  };
  int idx = 0;
  for (const Edit& e : edits) {
    auto g = format::GgufFile::open(shared + "/golden/models/" + e.model + ".gguf");
    ASSERT_TRUE(g.is_ok());
    format::GgufWriter w;
    for (const auto& [k, v] : (*g)->metadata()) w.set(k, v);
    if (e.key) w.set(e.key, format::GgufValue::from_u32(3));
    for (auto t : (*g)->tensors()) {
      if (t.name == e.tensor && !e.reshape) continue;
      if (t.name == e.tensor) std::swap(t.ne[0], t.ne[1]);
      ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes).is_ok());
    }
    const std::string path = temp_path("hybrid-bad-" + std::to_string(idx++) + ".gguf");
    ASSERT_TRUE(w.write(path).is_ok());
    auto m = models::load_model(path);
    ASSERT_FALSE(m.is_ok()) << e.model << " / " << e.expect;
    EXPECT_NE(m.status().message().find(e.expect), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace chimera::test
