// `chimera chat`: interactive multi-turn chat using the model's chat template
// (tokenizer.chat_template), or a plain fallback format. The sequence state is
// kept between turns: each turn renders the whole conversation, and only the
// text past what the model has already consumed (prompt + its own replies) is
// tokenized and fed, so earlier turns are never prefilled again.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/diffusion_options.h"
#include "cli/grammar_options.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace chimera::cli {
namespace {

// Aligns the text the model has consumed with a fresh rendering of the
// conversation and returns how much of the rendering it covers, or npos when
// they differ in more than blank space (templates often trim or add spaces
// around message content; the model keeping a slightly different blank is
// harmless, re-reading the whole conversation is not).
size_t align_consumed(const std::string& fed, const std::string& rendered) {
  auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t i = 0, j = 0;
  while (i < fed.size()) {
    if (j < rendered.size() && fed[i] == rendered[j]) {
      ++i;
      ++j;
    } else if (blank(fed[i])) {
      ++i;
    } else if (j < rendered.size() && blank(rendered[j])) {
      ++j;
    } else {
      return std::string::npos;
    }
  }
  return j;
}

struct ChatOptions {
  std::string model, system;
  int64_t n_predict = -1;
  int64_t n_ctx = 0;
  bool verbose = false;
  bool show_prompt = false;  // print each turn's fed text and token ids (stderr)
  ComputeOptions compute;
  SamplingOptions sampling;
  DiffusionCliOptions diffusion;  // masked diffusion LMs (LLaDA, Dream)
  GrammarCliOptions grammar;      // each reply follows the grammar
};

int run(const ChatOptions& o) {
  if (Status s = o.compute.apply(); !s) return report_error(s);
  auto diffusion = o.diffusion.resolve();
  if (!diffusion) return report_error(diffusion.status());
  auto mr = load_model_verbose(o.model, false);
  if (!mr) return report_error(mr.status());
  models::Model& model = **mr;
  const tokenizer::Tokenizer& tok = model.tokenizer();

  const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : "";
  const std::string eos = tok.eos() >= 0 ? tok.token_text(tok.eos()) : "";
  tokenizer::ChatTemplate tmpl = tokenizer::ChatTemplate::fallback();
  if (auto src = model.gguf().get_string("tokenizer.chat_template")) {
    auto parsed = tokenizer::ChatTemplate::parse(*src);
    if (parsed) {
      tmpl = std::move(parsed).value();
    } else {
      std::fprintf(stderr, "warning: cannot use the model's chat template (%s); using a plain format\n",
                   parsed.status().message().c_str());
    }
  } else {
    std::fprintf(stderr, "note: the model has no chat template; using a plain format\n");
  }

  const int64_t n_ctx = resolve_ctx(model, o.n_ctx);
  auto ctx = new_context(model);
  if (!ctx) return report_error(ctx.status());
  auto gen = runtime::make_generator(std::move(ctx).value(), n_ctx, &global_thread_pool());
  runtime::GenerateOptions go;
  go.n_predict = o.n_predict;
  go.sampling = o.sampling.p;
  go.diffusion = *diffusion;
  auto grammar = o.grammar.resolve(tok);
  if (!grammar) return report_error(grammar.status());
  std::optional<runtime::grammar::GrammarMatcher> matcher;
  if (*grammar) go.grammar = &matcher.emplace(*grammar);

  std::vector<tokenizer::ChatMessage> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  std::string fed;  // text the model has consumed so far
  const bool tty = isatty(STDIN_FILENO);
  // The console user is the operator: special-token text typed into a message
  // is parsed (unlike `chimera serve`, where message contents are plain text).
  std::fprintf(stderr, "chimera: special tokens are parsed in your messages (text such as \"%s\" becomes that token)\n",
               tok.eos() >= 0 ? tok.token_text(tok.eos()).c_str() : "</s>");
  if (tty) std::fprintf(stderr, "Type a message; an empty line or Ctrl-D ends the chat.\n");
  std::string line;
  for (;;) {
    if (tty) std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line)) break;
    if (line.empty() && tty) break;
    messages.push_back({"user", line});
    auto rendered = tmpl.render(messages, /*add_generation_prompt=*/true, bos, eos);
    if (!rendered) return report_error(rendered.status().with_context("chat template"));
    std::string delta;
    bool first_turn = fed.empty();
    const size_t consumed = first_turn ? std::string::npos : align_consumed(fed, *rendered);
    if (!first_turn && consumed != std::string::npos) {
      delta = rendered->substr(consumed);
    } else {
      if (!first_turn) {
        std::fprintf(stderr, "note: the template re-rendered earlier turns differently; re-reading the conversation\n");
        gen->reset();
      }
      delta = *rendered;
      first_turn = true;
    }
    // BOS: the vocabulary's rule, unless the template already wrote it.
    const bool add_special = first_turn && !(bos.size() && delta.compare(0, bos.size(), bos) == 0);
    std::vector<int32_t> ids = tok.encode(delta, add_special, /*parse_special=*/true);
    if (o.verbose) std::fprintf(stderr, "[feeding %zu new tokens]\n", ids.size());
    if (o.show_prompt) {
      std::fprintf(stderr, "[prompt text]%s[/prompt text]\n[prompt ids]", delta.c_str());
      for (int32_t id : ids) std::fprintf(stderr, " %d", id);
      std::fprintf(stderr, "\n");
    }
    std::string reply;
    if (matcher) matcher->reset();  // each reply is matched from the grammar's start
    tokenizer::StreamDecoder dec(tok, false);
    auto r = gen->generate(ids, go, [&](int32_t t) {
      std::string piece = dec.push(t);
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::string rest = dec.flush();
    reply += rest;
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
    std::fflush(stdout);
    if (!r) return report_error(r.status());
    if (o.verbose)
      std::fprintf(stderr, "[prompt %lld tokens %.1f tok/s, reply %lld tokens, context %lld/%lld]\n",
                   (long long)r->n_prompt, r->prompt_seconds > 0 ? r->n_prompt / r->prompt_seconds : 0.0,
                   (long long)r->n_generated, (long long)gen->n_past(), (long long)n_ctx);
    fed = *rendered + reply;
    if (r->stopped_at_eog && r->eog_token >= 0) fed += tok.token_to_piece(r->eog_token, /*render_special=*/true);
    // Stored like chat front ends do: without the leading/trailing blank space the
    // tokenizer puts at word starts (templates write "assistant: " + content).
    size_t b = reply.find_first_not_of(" \t\n"), e = reply.find_last_not_of(" \t\n");
    messages.push_back({"assistant", b == std::string::npos ? std::string() : reply.substr(b, e - b + 1)});
    if (r->hit_context_limit) {
      std::fprintf(stderr, "note: the context is full (%lld tokens); start a new chat or raise -c\n", (long long)n_ctx);
      break;
    }
  }
  return 0;
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* sub = app.add_subcommand("chat", "Interactive multi-turn chat with the model's chat template");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("--system", o->system, "System message");
  sub->add_option("-n,--n-predict", o->n_predict, "Maximum reply tokens (-1 = until end of turn)")
      ->capture_default_str()
      ->check(CLI::Range((int64_t)-1, kMaxCtx));
  add_ctx_option(sub, &o->n_ctx, "Context size (default 4096)");
  sub->add_flag("-v,--verbose", o->verbose, "Print per-turn token counts and speed");
  sub->add_flag("--show-prompt", o->show_prompt, "Print each turn's templated text and its token ids to stderr");
  o->compute.add_to(sub);
  o->sampling.add_to(sub);
  o->diffusion.add_to(sub);
  o->grammar.add_to(sub);
  sub->callback([o] { set_exit_code(run(*o)); });
}

}  // namespace chimera::cli
