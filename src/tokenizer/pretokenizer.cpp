// Pre-tokenizer regex table and the PCRE2-based splitter (see pretokenizer.h).
// The patterns are the ones published in each model's tokenizer.json (PCRE2
// supports the features they use: \p{..} classes, (?i:..), lookahead,
// possessive quantifiers), grouped by the `tokenizer.ggml.pre` names llama.cpp
// assigns to them. Where a model's Hugging Face pipeline is a Sequence of
// Split steps, the regexes are applied one after another like llama.cpp does.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstring>

#include "tokenizer/unicode.h"

namespace chimera::tokenizer {

namespace {

// --- patterns ---------------------------------------------------------------

const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// o200k_base (GPT-4o), also Llama 4.
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM: letters of the Latin/Greek/Cyrillic/... scripts as listed in its tokenizer.json.
const char* const kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    "\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06"
    "\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    "\U0001e900-\U0001e943]+";
const char* const kDeepseekLlmPunct = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+";
const char* const kCjkHangul = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";

const char* const kDeepseekV3Punct =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kBloom = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+";

const char* const kBailing =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

const char* const kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* const kJais2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)"
    R"(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S))"
    R"(|\s{1,2}(?!\S)|\s{1})";

const char* const kTinyAyaWords =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreEntry {
  std::vector<const char*> names;
  std::vector<const char*> regexes;
  bool ignore_merges = false;
  bool clean_spaces = true;
  bool add_bos = false;
  bool no_bos = false;
};

const std::vector<PreEntry>& pre_table() {
  static const std::vector<PreEntry> table = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3}, true, true, true},
      {{"dbrx", "smaug-bpe", "olmo2"}, {kLlama3}},
      {{"chatglm-bpe", "glm4"}, {kLlama3}, false, true, false, true},
      {{"deepseek-llm"}, {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, R"(\s+$)", kCjkHangul, R"(\p{N}+)"},
       false, false},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}, false, false},
      {{"deepseek-v3", "hunyuan-dense"},
       {R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", kDeepseekV3Punct}, false, false},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, {R"(\p{N})", kGpt2}},
      {{"command-r", "smollm"}, {R"(\p{N})", kGpt2}, false, false},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
        "jina-v2-code", "roberta-bpe", "a.x-4.0", "mellum", "modern-bert", "exaone4", "mpt", "olmo", "jais"},
       {kGpt2}},
      {{"trillion", "granite-docling"}, {kGpt2}, false, false},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"}, {kQwen2}, false, false},
      {{"stablelm2", "megrez"}, {kQwen2}},
      {{"qwen35"}, {kQwen35}, false, false},
      {{"poro-chat"}, {kBloom}, false, false},
      {{"bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"(\p{N})"}, false, false},
      {{"tekken"}, {kTekken}, true, false, true},
      {{"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", R"(\p{N})",
        R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
       false, false, true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}, false, false},
      {{"tiny_aya", "cohere2moe"}, {R"(\d{1,3}(?=(?:\d{3})*\b))", kTinyAyaWords}, false, false},
      {{"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}, false, false},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing}, false, false},
      {{"seed-coder"}, {kSeedCoder}, false, false},
      {{"jais-2"}, {kJais2}},
  };
  return table;
}

}  // namespace

Result<PreTokenizerSpec> pre_tokenizer_spec(std::string_view pre) {
  const std::string_view key = pre.empty() ? std::string_view("default") : pre;
  for (const auto& e : pre_table()) {
    for (const char* n : e.names) {
      if (key == n) {
        PreTokenizerSpec spec;
        spec.name = e.names[0];
        for (const char* r : e.regexes) spec.regexes.emplace_back(r);
        spec.ignore_merges = e.ignore_merges;
        spec.clean_spaces = e.clean_spaces;
        spec.add_bos = e.add_bos;
        spec.no_bos = e.no_bos;
        return spec;
      }
    }
  }
  return unsupported("unknown BPE pre-tokenizer '" + std::string(pre) +
                     "' (tokenizer.ggml.pre); supported: see known_pre_tokenizers()");
}

std::vector<std::string> known_pre_tokenizers() {
  std::vector<std::string> out;
  for (const auto& e : pre_table()) {
    for (const char* n : e.names) out.emplace_back(n);
  }
  return out;
}

// --- splitter ---------------------------------------------------------------

struct RegexSplitter::Impl {
  std::vector<pcre2_code*> codes;
  ~Impl() {
    for (auto* c : codes) pcre2_code_free(c);
  }
};

namespace {

// One JIT stack per thread: patterns with nested quantifiers can outgrow the
// default 32 KiB on long pieces.
struct ThreadMatchContext {
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchContext() {
    mctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (mctx && stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
  }
  ~ThreadMatchContext() {
    if (stack) pcre2_jit_stack_free(stack);
    if (mctx) pcre2_match_context_free(mctx);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadMatchContext ctx;
  return ctx.mctx;
}

size_t utf8_char_len_at(std::string_view s, size_t pos) {
  size_t p = pos;
  uint32_t cp = 0;
  utf8_next(s, p, cp);
  return p - pos;
}

}  // namespace

RegexSplitter::RegexSplitter() = default;
RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

Result<RegexSplitter> RegexSplitter::create(const std::vector<std::string>& patterns) {
  auto impl = std::make_shared<Impl>();
  for (const auto& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile((PCRE2_SPTR)p.data(), p.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK, &err,
                                     &err_off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return invalid_argument("cannot compile pre-tokenizer regex at offset " + std::to_string(err_off) + ": " +
                              reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    impl->codes.push_back(code);
  }
  RegexSplitter s;
  s.impl_ = std::move(impl);
  return s;
}

std::vector<std::string> RegexSplitter::split(std::string_view input) const {
  const std::string text = utf8_sanitize(input);
  // Pieces as [begin, end) byte ranges of `text`.
  std::vector<std::pair<size_t, size_t>> pieces;
  if (!text.empty()) pieces.emplace_back(0, text.size());
  if (impl_) {
    pcre2_match_context* mctx = thread_match_context();
    for (pcre2_code* code : impl_->codes) {
      pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
      if (!md) break;
      std::vector<std::pair<size_t, size_t>> next;
      next.reserve(pieces.size() * 2);
      for (const auto& [b, e] : pieces) {
        // Match inside the piece only, so lookarounds and `$` see its ends.
        const std::string_view piece(text.data() + b, e - b);
        size_t prev = 0, start = 0;
        while (start <= piece.size()) {
          const int rc = pcre2_match(code, (PCRE2_SPTR)piece.data(), piece.size(), start, PCRE2_NO_UTF_CHECK, md,
                                     mctx);
          if (rc < 0) break;  // no match, or a resource limit: keep the rest as one gap
          const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
          const size_t ms = ov[0], me = ov[1];
          if (ms < prev || me < ms) break;  // \K or lookbehind oddities: stop safely
          if (ms > prev) next.emplace_back(b + prev, b + ms);
          if (me > ms) {
            next.emplace_back(b + ms, b + me);
            prev = me;
            start = me;
          } else {
            // Empty match: a split point; step over one character.
            prev = ms;
            if (ms >= piece.size()) break;
            start = ms + utf8_char_len_at(piece, ms);
          }
        }
        if (prev < piece.size()) next.emplace_back(b + prev, e);
      }
      pcre2_match_data_free(md);
      pieces.swap(next);
    }
  }
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& [b, e] : pieces) {
    if (e > b) out.emplace_back(text.substr(b, e - b));
  }
  return out;
}

}  // namespace chimera::tokenizer
