// Writes a long golden case (tests/data/golden_long/NAME.*) with libllama:
// the prompt read from a text file is tokenized by the model's vocabulary
// (add_special, parse_special), evaluated as ONE batch with logits for every
// row, then N_GEN greedy tokens are decoded one at a time. Settings follow
// ../shared/golden/README.md (2 threads, f32 KV, no flash attention, n_ctx =
// max(512, n_prompt + n_gen + 8), single-batch prompt). The prompt is cut to
// its first N_PROMPT tokens. The logits files keep only `logits_columns` (32
// evenly spaced ids plus every greedy token) to stay small; argmax, top-10 and
// row statistics are computed on full rows (tests compare the top-10 logits
// of every row by id as well).
// Build and run commands: scripts/llamacpp_refs/README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"

namespace {

using nlohmann::json;

std::string piece(const llama_vocab* v, llama_token t) {
  char buf[256];
  const int n = llama_token_to_piece(v, t, buf, sizeof buf, 0, true);
  return n < 0 ? std::string() : std::string(buf, (size_t)n);
}

json top10(const float* row, int n) {
  std::vector<int> idx((size_t)n);
  for (int i = 0; i < n; ++i) idx[(size_t)i] = i;
  std::partial_sort(idx.begin(), idx.begin() + 10, idx.end(),
                    [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  json out = json::array();
  for (int k = 0; k < 10; ++k) out.push_back({idx[(size_t)k], row[idx[(size_t)k]]});
  return out;
}

json stats(const float* row, int n) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) s += row[i];
  const double mean = s / n;
  for (int i = 0; i < n; ++i) s2 += (row[i] - mean) * (row[i] - mean);
  return {{"mean", mean}, {"std", std::sqrt(s2 / n)}};
}

int argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr,
                 "usage: %s MODEL.gguf MODEL_REL_TO_SHARED PROMPT.txt N_PROMPT N_GEN TOLERANCE OUT_DIR/NAME "
                 "COMMAND_TEXT\n",
                 argv[0]);
    return 2;
  }
  const std::string model_path = argv[1], model_rel = argv[2], prompt_path = argv[3], out = argv[7];
  const int n_prompt_max = std::atoi(argv[4]), n_gen = std::atoi(argv[5]);
  const double tolerance = std::atof(argv[6]);
  std::ifstream pf(prompt_path);
  const std::string prompt((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  if (prompt.empty()) {
    std::fprintf(stderr, "empty prompt %s\n", prompt_path.c_str());
    return 1;
  }

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int nv = llama_vocab_n_tokens(vocab);

  std::vector<llama_token> toks(prompt.size() + 8);
  const int n_tok = llama_tokenize(vocab, prompt.data(), (int32_t)prompt.size(), toks.data(), (int32_t)toks.size(), true, true);
  if (n_tok < n_prompt_max) {
    std::fprintf(stderr, "prompt has %d tokens, fewer than %d\n", n_tok, n_prompt_max);
    return 1;
  }
  const int np = n_prompt_max;
  toks.resize((size_t)np);

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)std::max(512, np + n_gen + 8);
  cp.n_batch = cp.n_ubatch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;

  std::vector<float> prompt_rows((size_t)np * nv), gen_rows((size_t)n_gen * nv);
  llama_batch b = llama_batch_init(np, 0, 1);
  for (int i = 0; i < np; ++i) {
    b.token[i] = toks[(size_t)i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = np;
  if (llama_decode(ctx, b) != 0) return 1;
  for (int i = 0; i < np; ++i) std::copy_n(llama_get_logits_ith(ctx, i), nv, prompt_rows.data() + (size_t)i * nv);

  std::vector<llama_token> gen;
  const float* last = prompt_rows.data() + (size_t)(np - 1) * nv;
  for (int j = 0; j < n_gen; ++j) {
    std::copy_n(last, nv, gen_rows.data() + (size_t)j * nv);
    const llama_token t = argmax(gen_rows.data() + (size_t)j * nv, nv);
    gen.push_back(t);
    if (j + 1 == n_gen) break;
    b.n_tokens = 1;
    b.token[0] = t;
    b.pos[0] = np + j;
    b.logits[0] = 1;
    if (llama_decode(ctx, b) != 0) return 1;
    last = llama_get_logits_ith(ctx, 0);
  }
  llama_batch_free(b);

  std::set<int> cols;
  for (int k = 0; k < 32; ++k) cols.insert((int)((int64_t)k * nv / 32));
  json pargmax = json::array(), pstats = json::array(), ptop = json::array(), gtop = json::array();
  json ppieces = json::array(), gpieces = json::array();
  std::string text;
  for (int i = 0; i < np; ++i) {
    const float* r = prompt_rows.data() + (size_t)i * nv;
    pargmax.push_back(argmax(r, nv));
    pstats.push_back(stats(r, nv));
    ptop.push_back(top10(r, nv));
    ppieces.push_back(piece(vocab, toks[(size_t)i]));
  }
  for (int j = 0; j < n_gen; ++j) {
    cols.insert(gen[(size_t)j]);
    gtop.push_back(top10(gen_rows.data() + (size_t)j * nv, nv));
    gpieces.push_back(piece(vocab, gen[(size_t)j]));
    text += piece(vocab, gen[(size_t)j]);
  }
  const std::vector<int> colv(cols.begin(), cols.end());
  const std::string base = out.substr(out.find_last_of('/') + 1);
  auto write_cols = [&](const std::string& path, const std::vector<float>& rows, int n) {
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < n; ++i)
      for (int c : colv) f.write(reinterpret_cast<const char*>(&rows[(size_t)i * nv + c]), 4);
  };
  write_cols(out + ".prompt_logits.f32", prompt_rows, np);
  write_cols(out + ".gen_logits.f32", gen_rows, n_gen);

  char arch[128] = {0};
  llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
  json m;
  m["generator"] = std::string("libllama (llama.cpp ") + LLAMA_REF_COMMIT + "): " + argv[7];
  m["model"] = model_rel;
  m["model_base"] = "shared";
  m["arch"] = arch;
  m["n_vocab"] = nv;
  m["is_diffusion"] = false;
  m["tolerance"] = tolerance;
  m["settings"] = {{"n_threads", 2}, {"kv_type", "f32"}, {"flash_attn", false}, {"n_ctx", cp.n_ctx},
                   {"prompt_single_batch", true}};
  m["prompt"] = nullptr;  // the case is its token ids: the first N_PROMPT tokens of the prompt file
  m["prompt_file"] = prompt_path;
  m["tokenize"] = {{"add_special", true}, {"parse_special", true}};
  m["prompt_tokens"] = toks;
  m["prompt_pieces"] = ppieces;
  m["logits_columns"] = colv;
  m["prompt_logits_file"] = base + ".prompt_logits.f32";
  m["prompt_logits_shape"] = {np, (int)colv.size()};
  m["prompt_argmax"] = pargmax;
  m["prompt_logit_stats"] = pstats;
  m["prompt_top10"] = ptop;
  m["greedy"] = {{"mode", "autoregressive_argmax"}, {"n_gen", n_gen}, {"stop_at_eog", false}, {"tokens", gen},
                 {"pieces", gpieces}, {"text", text}, {"gen_logits_file", base + ".gen_logits.f32"},
                 {"gen_logits_shape", {n_gen, (int)colv.size()}}, {"top10", gtop}};
  std::ofstream(out + ".json") << m.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  std::fprintf(stderr, "%s: %d prompt tokens, %d generated, %zu columns\n", out.c_str(), np, n_gen, colv.size());
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
