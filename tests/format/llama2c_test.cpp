// llama2.c import tests. Golden: converting the shared stories260K.bin +
// tok512.bin must reproduce llama.cpp's stories260K.gguf — byte for byte with
// llama.cpp's constants (name "llama", context 128), and with our defaults every
// tensor and key identical except the listed ones. Also: synthetic checkpoints
// (unshared classifier, GQA shapes), truncated / padded / garbage checkpoints,
// vocabulary mismatches, llama.cpp's token rewriting rules, and the CLI.
#include "format/llama2c/llama2c.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "format/gguf/gguf.h"
#include "models/model.h"
#include "test_util.h"

namespace chimera::format::llama2c {
namespace {

std::string models_dir(const std::string& shared) { return shared + "/models"; }

std::shared_ptr<MappedFile> bytes_file(const std::vector<uint8_t>& b) { return MappedFile::from_bytes(b.data(), b.size()); }

template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

// A synthetic legacy checkpoint whose float i (after the header) is i * 0.5.
std::vector<uint8_t> synth_checkpoint(int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv_heads,
                                      int32_t vocab, int32_t seq, bool shared) {
  std::vector<uint8_t> b;
  for (int32_t v : {dim, hidden, layers, heads, kv_heads, shared ? vocab : -vocab, seq}) append(b, v);
  const int64_t kv = dim / heads * kv_heads, hs = dim / heads;
  int64_t n = int64_t{vocab} * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) + dim +
              seq * hs + (shared ? 0 : int64_t{vocab} * dim);
  for (int64_t i = 0; i < n; ++i) append(b, static_cast<float>(i) * 0.5f);
  return b;
}

std::vector<uint8_t> synth_vocab(int32_t n) {
  std::vector<uint8_t> b;
  append(b, int32_t{8});
  for (int32_t i = 0; i < n; ++i) {
    std::string t = i == 3 ? "<0x0A>" : (i == 4 ? " hi" : "t" + std::to_string(i));
    append(b, -static_cast<float>(i));
    append(b, static_cast<int32_t>(t.size()));
    b.insert(b.end(), t.begin(), t.end());
  }
  return b;
}

// Keys whose values may differ between our default output and llama.cpp's.
const std::set<std::string> kAllowedDifferences = {
    "general.name",          // llama.cpp: constant "llama"; ours: the checkpoint's file stem
    "llama.context_length",  // llama.cpp: constant 128 (its tool default); ours: header seq_len (512)
};

TEST(Llama2c, Stories260KIsByteIdenticalToLlamaCpp) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string dir = models_dir(shared);
  auto ck = Checkpoint::open(dir + "/llama2c/stories260K.bin");
  ASSERT_TRUE(ck) << ck.status().message();
  const Config& c = ck->config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  auto vocab = Vocab::open(dir + "/llama2c/tok512.bin");
  ASSERT_TRUE(vocab) << vocab.status().message();
  EXPECT_EQ(vocab->tokens.size(), 512u);

  ConvertOptions opts;
  opts.name = "llama";
  opts.context_length = 128;
  auto w = build_gguf(ck.value(), vocab.value(), opts);
  ASSERT_TRUE(w) << w.status().message();
  const std::vector<uint8_t> ours = w->to_bytes();
  const std::vector<uint8_t> ref = test::read_file_bytes(dir + "/stories260K.gguf");
  ASSERT_EQ(ours.size(), ref.size());
  EXPECT_TRUE(ours == ref);
}

TEST(Llama2c, Stories260KDefaultsMatchExceptListedKeys) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string dir = models_dir(shared);
  const std::string out = test::temp_path("stories260K.gguf");
  ConvertOptions opts;
  opts.name = "stories260K";
  opts.check = &models::check_model_header;
  std::vector<std::string> progress;
  opts.progress = [&](const TensorPlan& t) { progress.push_back(t.name); };
  Status st = convert(dir + "/llama2c/stories260K.bin", dir + "/llama2c/tok512.bin", out, opts);
  ASSERT_TRUE(st) << st.message();
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));

  auto ours = GgufFile::open(out);
  ASSERT_TRUE(ours) << ours.status().message();
  auto ref = GgufFile::open(dir + "/stories260K.gguf");
  ASSERT_TRUE(ref) << ref.status().message();

  // Tensors: same names, order, shapes, types and bytes.
  const auto& ta = (*ours)->tensors();
  const auto& tb = (*ref)->tensors();
  ASSERT_EQ(ta.size(), tb.size());
  ASSERT_EQ(progress.size(), ta.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    SCOPED_TRACE(tb[i].name);
    EXPECT_EQ(ta[i].name, tb[i].name);
    EXPECT_EQ(progress[i], tb[i].name);
    EXPECT_EQ(ta[i].ne, tb[i].ne);
    EXPECT_EQ(ta[i].type, tb[i].type);
    ASSERT_EQ(ta[i].n_bytes, tb[i].n_bytes);
    EXPECT_EQ(std::memcmp(ta[i].data, tb[i].data, ta[i].n_bytes), 0);
  }

  // Metadata: same keys in the same order with the same types and values,
  // except the listed differences.
  const auto& ka = (*ours)->metadata();
  const auto& kb = (*ref)->metadata();
  ASSERT_EQ(ka.size(), kb.size());
  std::set<std::string> differing;
  for (size_t i = 0; i < ka.size(); ++i) {
    ASSERT_EQ(ka[i].first, kb[i].first);
    const GgufValue& a = ka[i].second;
    const GgufValue& b = kb[i].second;
    EXPECT_EQ(a.type, b.type) << ka[i].first;
    const bool same = a.to_display(1u << 20) == b.to_display(1u << 20);
    if (!same) differing.insert(ka[i].first);
  }
  EXPECT_EQ(differing, kAllowedDifferences);
  EXPECT_EQ((*ours)->get_string("general.name").value_or(""), "stories260K");
  EXPECT_EQ((*ours)->get_int("llama.context_length").value_or(0), 512);

  // Tokenizer arrays element by element (scores bit-exact, including -0.0).
  const GgufValue* sa = (*ours)->get_array("tokenizer.ggml.scores");
  const GgufValue* sb = (*ref)->get_array("tokenizer.ggml.scores");
  ASSERT_TRUE(sa && sb);
  ASSERT_EQ(sa->arr.size(), sb->arr.size());
  for (size_t i = 0; i < sa->arr.size(); ++i) {
    const float fa = static_cast<float>(sa->arr[i].f), fb = static_cast<float>(sb->arr[i].f);
    EXPECT_EQ(std::memcmp(&fa, &fb, sizeof fa), 0) << i;
  }
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type"}) {
    const GgufValue* xa = (*ours)->get_array(key);
    const GgufValue* xb = (*ref)->get_array(key);
    ASSERT_TRUE(xa && xb) << key;
    ASSERT_EQ(xa->arr.size(), xb->arr.size()) << key;
    for (size_t i = 0; i < xa->arr.size(); ++i) {
      EXPECT_EQ(xa->arr[i].s, xb->arr[i].s) << key << " " << i;
      EXPECT_EQ(xa->arr[i].i, xb->arr[i].i) << key << " " << i;
    }
  }
  std::filesystem::remove(out);
}

TEST(Llama2c, TruncatedCheckpointIsAnError) {
  auto full = synth_checkpoint(8, 12, 2, 2, 1, 10, 4, true);
  ASSERT_TRUE(Checkpoint::parse(bytes_file(full)));
  for (size_t cut : {size_t{0}, size_t{5}, size_t{27}, size_t{28}, full.size() / 2, full.size() - 1}) {
    std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    auto r = Checkpoint::parse(bytes_file(b));
    ASSERT_FALSE(r) << cut;
    EXPECT_NE(r.status().message().find(cut < 28 ? "too short" : "truncated"), std::string::npos)
        << r.status().message();
  }
  // An unshared classifier needs vocab*dim more floats: reading a shared file
  // as unshared is "truncated", the reverse reports trailing bytes.
  auto flipped = full;
  int32_t neg = -10;
  std::memcpy(flipped.data() + 20, &neg, 4);
  EXPECT_FALSE(Checkpoint::parse(bytes_file(flipped)));
  full.push_back(0);
  auto r = Checkpoint::parse(bytes_file(full));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("trailing"), std::string::npos) << r.status().message();
}

TEST(Llama2c, GarbageHeadersAreErrors) {
  auto good = synth_checkpoint(8, 12, 2, 2, 1, 10, 4, true);
  auto with = [&](size_t field, int32_t v) {
    auto b = good;
    std::memcpy(b.data() + field * 4, &v, 4);
    return Checkpoint::parse(bytes_file(b));
  };
  EXPECT_FALSE(with(0, 0));                        // dim 0
  EXPECT_FALSE(with(0, -8));                       // negative dim
  EXPECT_FALSE(with(3, 3));                        // dim % heads != 0
  EXPECT_FALSE(with(4, 0));                        // no kv heads
  EXPECT_FALSE(with(4, 4));                        // kv heads > heads
  EXPECT_FALSE(with(5, INT32_MIN));                // |INT32_MIN| overflows
  EXPECT_FALSE(with(0, 0x7fffffff));               // sizes overflow or exceed the file
  EXPECT_FALSE(with(2, 0x7fffffff));
  auto magic = with(0, 0x616b3432);                // versioned export
  ASSERT_FALSE(magic);
  EXPECT_EQ(magic.status().code(), StatusCode::kUnsupported);
  std::vector<uint8_t> noise(4096);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>(i * 131 + 7);
  EXPECT_FALSE(Checkpoint::parse(bytes_file(noise)));
  EXPECT_FALSE(Checkpoint::open("/nonexistent/model.bin"));
}

TEST(Llama2c, UnsharedClassifierAndGqaShapes) {
  const int32_t dim = 8, hidden = 12, layers = 2, heads = 4, kv_heads = 2, vocab = 6, seq = 3;
  auto b = synth_checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq, false);
  auto ck = Checkpoint::parse(bytes_file(b));
  ASSERT_TRUE(ck) << ck.status().message();
  EXPECT_FALSE(ck->config().shared_classifier);
  EXPECT_EQ(ck->config().vocab_size, vocab);
  auto v = Vocab::parse(synth_vocab(vocab).data(), synth_vocab(vocab).size(), "synthetic");
  ASSERT_TRUE(v) << v.status().message();
  auto w = build_gguf(ck.value(), v.value(), {});
  ASSERT_TRUE(w) << w.status().message();
  auto bytes = w->to_bytes();
  auto g = GgufFile::parse(MappedFile::from_bytes(bytes.data(), bytes.size()));
  ASSERT_TRUE(g) << g.status().message();
  const GgufFile& f = *g.value();
  EXPECT_EQ(f.tensors().size(), 3u + 9u * layers);
  const auto* k = f.find_tensor("blk.1.attn_k.weight");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->ne, (std::vector<int64_t>{dim, dim / heads * kv_heads}));
  const auto* down = f.find_tensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->ne, (std::vector<int64_t>{hidden, dim}));
  // The classifier is the last array of the file, after the RoPE tables.
  const auto* out = f.find_tensor("output.weight");
  ASSERT_TRUE(out);
  const uint64_t n_floats = (b.size() - 28) / 4;
  float first;
  std::memcpy(&first, out->data, 4);
  EXPECT_EQ(first, static_cast<float>(n_floats - uint64_t{vocab} * dim) * 0.5f);
  // Layer slicing: blk.1.attn_q starts dim*dim floats after blk.0.attn_q.
  float q0, q1;
  std::memcpy(&q0, f.find_tensor("blk.0.attn_q.weight")->data, 4);
  std::memcpy(&q1, f.find_tensor("blk.1.attn_q.weight")->data, 4);
  EXPECT_EQ(q1 - q0, dim * dim * 0.5f);
  EXPECT_EQ(f.get_string("general.name").value_or(""), "llama");
  EXPECT_EQ(f.get_int("llama.context_length").value_or(0), seq);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count").value_or(0), dim / heads);
}

TEST(Llama2c, VocabMismatchIsAnError) {
  auto ck = Checkpoint::parse(bytes_file(synth_checkpoint(8, 12, 1, 2, 2, 10, 4, true)));
  ASSERT_TRUE(ck);
  for (int32_t n : {9, 11}) {
    auto bytes = synth_vocab(n);
    auto v = Vocab::parse(bytes.data(), bytes.size(), "synthetic");
    ASSERT_TRUE(v);
    auto w = build_gguf(ck.value(), v.value(), {});
    ASSERT_FALSE(w);
    EXPECT_NE(w.status().message().find("vocabulary mismatch"), std::string::npos) << w.status().message();
  }
  // Truncated inside a token, inside a token header, negative length.
  auto bytes = synth_vocab(10);
  EXPECT_FALSE(Vocab::parse(bytes.data(), bytes.size() - 1, "synthetic"));
  EXPECT_FALSE(Vocab::parse(bytes.data(), 4 + 5, "synthetic"));
  EXPECT_FALSE(Vocab::parse(bytes.data(), 2, "synthetic"));
  auto neg = bytes;
  int32_t bad = -3;
  std::memcpy(neg.data() + 8, &bad, 4);
  EXPECT_FALSE(Vocab::parse(neg.data(), neg.size(), "synthetic"));
  EXPECT_FALSE(Vocab::open("/nonexistent/tok.bin"));
}

TEST(Llama2c, SharedVocabAgainstWrongModelFailsInConvert) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string tok = models_dir(shared) + "/llama2c/tok512.bin";
  const std::string model = test::temp_path("vocab10.bin");
  auto b = synth_checkpoint(8, 12, 1, 2, 2, 10, 4, true);
  std::FILE* f = std::fopen(model.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
  const std::string out = test::temp_path("never.gguf");
  Status st = convert(model, tok, out, {.check = &models::check_model_header});
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("512 tokens"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  std::filesystem::remove(model);
}

TEST(Llama2c, TokenRulesFollowLlamaCpp) {
  auto tok = [](int32_t id, const std::string& s) { return to_gguf_token(id, VocabEntry{s, 1.5f}); };
  EXPECT_EQ(tok(0, "anything").text, "<unk>");
  EXPECT_EQ(tok(0, "x").type, TokenType::kUnknown);
  EXPECT_EQ(tok(1, "\n<s>\n").text, "<s>");
  EXPECT_EQ(tok(1, "").type, TokenType::kControl);
  EXPECT_EQ(tok(2, "x").text, "</s>");
  EXPECT_EQ(tok(5, "").type, TokenType::kControl);
  EXPECT_EQ(tok(5, "<0x0A>").type, TokenType::kByte);
  EXPECT_EQ(tok(5, "<0xff>").type, TokenType::kByte);
  EXPECT_EQ(tok(5, "<0xF").type, TokenType::kByte);  // sscanf does not check the '>'
  EXPECT_EQ(tok(5, "<0xZZ>").type, TokenType::kNormal);
  EXPECT_EQ(tok(5, "<0x>").type, TokenType::kNormal);
  EXPECT_EQ(tok(5, " the  end").text, "\xe2\x96\x81" "the" "\xe2\x96\x81" "\xe2\x96\x81" "end");
  EXPECT_EQ(tok(5, " the").type, TokenType::kNormal);
  EXPECT_EQ(tok(5, "x").score, 1.5f);
}

// The `chimera convert` command end to end (skipped when the binary is not built).
TEST(Llama2c, ConvertCommand) {
  CHIMERA_REQUIRE_SHARED(shared);
  const std::string bin = test::chimera_binary();
  ASSERT_TRUE(std::filesystem::exists(bin)) << bin << " not built";
  const std::string dir = models_dir(shared) + "/llama2c";
  const std::string out = test::temp_path("cli.gguf"), err = test::temp_path("cli.err");
  std::string cmd = bin + " convert --from llama2c " + dir + "/stories260K.bin --vocab " + dir +
                    "/tok512.bin --ctx 128 --name llama -o " + out + " 2>" + err;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(test::read_file_bytes(out) == test::read_file_bytes(models_dir(shared) + "/stories260K.gguf"));
  auto log = test::read_file_bytes(err);
  EXPECT_NE(std::string(log.begin(), log.end()).find("blk.4.ffn_norm.weight"), std::string::npos);

  cmd = bin + " convert --from nope " + dir + "/stories260K.bin -o " + out + " 2>" + err;
  EXPECT_NE(std::system(cmd.c_str()), 0);
  log = test::read_file_bytes(err);
  std::string msg(log.begin(), log.end());
  EXPECT_NE(msg.find("error: unknown source format 'nope'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama2c"), std::string::npos) << msg;

  cmd = bin + " convert --from llama2c " + dir + "/stories260K.bin -o " + out + " 2>" + err;  // no --vocab
  EXPECT_NE(std::system(cmd.c_str()), 0);
  cmd = bin + " convert --from llama2c " + dir + "/tok512.bin --vocab " + dir + "/tok512.bin -o " + out + " 2>" + err;
  EXPECT_NE(std::system(cmd.c_str()), 0);
  log = test::read_file_bytes(err);
  msg.assign(log.begin(), log.end());
  EXPECT_NE(msg.find("error: llama2.c checkpoint"), std::string::npos) << msg;
  std::filesystem::remove(out);
  std::filesystem::remove(err);
}

}  // namespace
}  // namespace chimera::format::llama2c
