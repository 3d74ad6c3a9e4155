// llama2.c -> GGUF conversion, reproducing llama.cpp's convert-llama2c-to-ggml:
// the same metadata keys in the same order, the same token rewriting, and the
// same tensors (names, shapes, order, F32 bytes copied verbatim; the shared
// classifier is written again as output.weight). Deliberate differences:
// general.name and llama.context_length are options (llama.cpp writes the
// constants "llama" and 128), and rope.dimension_count is the full head size
// even above 64 (llama.cpp caps it at 64).
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "format/gguf/tensor_names.h"
#include "format/llama2c/llama2c.h"

namespace chimera::format::llama2c {

namespace {

// llama.cpp tests byte tokens with sscanf(text, "<0x%02hhX>", &b) == 1: the
// literal "<0x", then optional white space, an optional sign and at least one
// hex digit within a field width of 2. The closing '>' is not checked.
bool looks_like_byte_token(const std::string& s) {
  if (s.compare(0, 3, "<0x") != 0) return false;
  size_t i = 3;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  int width = 2;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    ++i;
    --width;
  }
  return width > 0 && i < s.size() && std::isxdigit(static_cast<unsigned char>(s[i]));
}

std::string escape_spaces(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == ' ') {
      out += "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
    } else {
      out += c;
    }
  }
  return out;
}

std::string shape_of(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

GgufToken to_gguf_token(int32_t id, const VocabEntry& e) {
  GgufToken t;
  t.score = e.score;
  t.text = e.text;
  if (id == kUnknownId) {
    t.text = "<unk>";
    t.type = TokenType::kUnknown;
  } else if (id == kBosId) {
    t.text = "<s>";
    t.type = TokenType::kControl;
  } else if (id == kEosId) {
    t.text = "</s>";
    t.type = TokenType::kControl;
  } else if (t.text.empty()) {
    t.type = TokenType::kControl;
  } else if (looks_like_byte_token(t.text)) {
    t.type = TokenType::kByte;
  } else {
    t.type = TokenType::kNormal;
  }
  t.text = escape_spaces(t.text);
  return t;
}

std::vector<TensorPlan> tensor_plan(const Checkpoint& ck) {
  const Config& c = ck.config();
  const int64_t dim = c.dim, hid = c.hidden_dim, kv = c.kv_dim(), vocab = c.vocab_size;
  std::vector<TensorPlan> plan;
  plan.push_back({tn::kTokenEmbd, {dim, vocab}, ck.token_embedding});
  plan.push_back({tn::kOutputNorm, {dim}, ck.rms_final});
  plan.push_back({tn::kOutput, {dim, vocab}, ck.classifier});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    plan.push_back({tn::at(tn::kAttnQ, l), {dim, dim}, ck.layer_slice(ck.wq, l)});
    plan.push_back({tn::at(tn::kAttnK, l), {dim, kv}, ck.layer_slice(ck.wk, l)});
    plan.push_back({tn::at(tn::kAttnV, l), {dim, kv}, ck.layer_slice(ck.wv, l)});
    plan.push_back({tn::at(tn::kAttnOutput, l), {dim, dim}, ck.layer_slice(ck.wo, l)});
    plan.push_back({tn::at(tn::kAttnNorm, l), {dim}, ck.layer_slice(ck.rms_att, l)});
    plan.push_back({tn::at(tn::kFfnGate, l), {dim, hid}, ck.layer_slice(ck.w1, l)});
    plan.push_back({tn::at(tn::kFfnDown, l), {hid, dim}, ck.layer_slice(ck.w2, l)});
    plan.push_back({tn::at(tn::kFfnUp, l), {dim, hid}, ck.layer_slice(ck.w3, l)});
    plan.push_back({tn::at(tn::kFfnNorm, l), {dim}, ck.layer_slice(ck.rms_ffn, l)});
  }
  return plan;
}

Result<GgufWriter> build_gguf(const Checkpoint& ck, const Vocab& vocab, const ConvertOptions& opts) {
  const Config& c = ck.config();
  if (vocab.tokens.size() != static_cast<size_t>(c.vocab_size))
    return invalid_argument("vocabulary mismatch: the vocabulary holds " + std::to_string(vocab.tokens.size()) +
                            " tokens but the checkpoint's vocab_size is " + std::to_string(c.vocab_size));

  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  texts.reserve(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    GgufToken t = to_gguf_token(static_cast<int32_t>(i), vocab.tokens[i]);
    texts.push_back(std::move(t.text));
    scores.push_back(t.score);
    types.push_back(static_cast<int32_t>(t.type));
  }

  // Keys in llama.cpp's order, so the whole file can match byte for byte.
  GgufWriter w(3);
  w.set("tokenizer.ggml.tokens", GgufValue::from_strings(texts));
  w.set("tokenizer.ggml.scores", GgufValue::from_f32s(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::from_i32s(types));
  w.set("tokenizer.ggml.model", GgufValue::from_string("llama"));
  w.set("general.architecture", GgufValue::from_string("llama"));
  w.set("general.name", GgufValue::from_string(opts.name.empty() ? "llama" : opts.name));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(kUnknownId));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(kBosId));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(kEosId));
  // llama.cpp's spelling ("seperator"); -1 as u32 means "none".
  w.set("tokenizer.ggml.seperator_token_id", GgufValue::from_u32(0xFFFFFFFFu));
  w.set("tokenizer.ggml.padding_token_id", GgufValue::from_u32(0xFFFFFFFFu));
  const uint32_t n_ctx = opts.context_length ? opts.context_length : static_cast<uint32_t>(c.seq_len);
  w.set("llama.context_length", GgufValue::from_u32(n_ctx));
  w.set("llama.embedding_length", GgufValue::from_u32(static_cast<uint32_t>(c.dim)));
  w.set("llama.feed_forward_length", GgufValue::from_u32(static_cast<uint32_t>(c.hidden_dim)));
  w.set("llama.attention.head_count", GgufValue::from_u32(static_cast<uint32_t>(c.n_heads)));
  w.set("llama.attention.head_count_kv", GgufValue::from_u32(static_cast<uint32_t>(c.n_kv_heads)));
  w.set("llama.block_count", GgufValue::from_u32(static_cast<uint32_t>(c.n_layers)));
  // llama2.c rotates the whole head. llama.cpp writes min(head_size, 64) (its
  // n_rotmax), which only differs for heads wider than 64; we keep the truth.
  w.set("llama.rope.dimension_count", GgufValue::from_u32(static_cast<uint32_t>(c.head_size())));
  w.set("llama.attention.layer_norm_rms_epsilon", GgufValue::from_f32(1e-5f));

  for (const TensorPlan& t : tensor_plan(ck)) {
    if (opts.progress) opts.progress(t);
    Status st = w.add_tensor(t.name, GgmlType::F32, t.ne, ck.data(t.source), t.source.bytes());
    if (!st.is_ok()) return st.with_context("tensor " + t.name + " " + shape_of(t.ne));
  }
  return w;
}

Status convert(const std::string& model_path, const std::string& vocab_path, const std::string& out_path,
               const ConvertOptions& opts) {
  auto ck = Checkpoint::open(model_path);
  if (!ck) return ck.status();
  auto vocab = Vocab::open(vocab_path);
  if (!vocab) return vocab.status();
  auto writer = build_gguf(ck.value(), vocab.value(), opts);
  if (!writer) return writer.status().with_context("'" + model_path + "' with '" + vocab_path + "'");

  return writer.value().write(out_path, opts.check);  // via out_path + ".partial"
}

}  // namespace chimera::format::llama2c
