// Chat prompts whose message contents stay plain text; see chat_prompt.h.
#include "tokenizer/chat_prompt.h"

#include <cinttypes>
#include <cstdio>
#include <random>
#include <string_view>

namespace chimera::tokenizer {
namespace {

using ojson = nlohmann::ordered_json;

// Where a user-text string sits in the messages.
struct ContentRef {
  size_t message;
  std::string path;   // for errors: "messages[2].content[1].text"
  std::string text;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The text fields a template prints as content. Replaced by sentinels in the
// copy; every other string (and key) is checked for control-token text.
bool is_content_key(const std::string& key) { return key == "content" || key == "reasoning_content"; }

// Walks v without recursion: any string or key holding control-token text is
// an error naming its path (strings starting with `skip`, the sentinels, are not).
Status check_strings(const Tokenizer& tok, const ojson& v0, const std::string& base, const std::string& skip) {
  std::vector<std::pair<const ojson*, std::string>> stack = {{&v0, base}};
  while (!stack.empty()) {
    auto [v, path] = stack.back();
    stack.pop_back();
    if (v->is_string()) {
      const std::string& s = v->get_ref<const std::string&>();
      if ((skip.empty() || s.rfind(skip, 0) != 0) && tok.contains_control_text(s))
        return invalid_argument(path + " contains special-token text; only message contents may (as plain text)");
    } else if (v->is_object()) {
      for (auto it = v->begin(); it != v->end(); ++it) {
        if (tok.contains_control_text(it.key()))
          return invalid_argument(path + " has a key that contains special-token text");
        stack.push_back({&it.value(), path + "." + it.key()});
      }
    } else if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) stack.push_back({&(*v)[i], path + "[" + std::to_string(i) + "]"});
    }
  }
  return Status::ok();
}

// Walks one message without recursion: content strings (and text parts) go to
// *contents and are replaced in *copy by sentinel(k); any other string or key
// holding control-token text is an error.
Status collect(const ojson& msg, size_t index, const Tokenizer& tok, const std::string& nonce, ojson* copy,
               std::vector<ContentRef>* contents) {
  const std::string base = "messages[" + std::to_string(index) + "]";
  auto sentinel = [&](size_t k) { return nonce + "N" + std::to_string(k) + "E"; };
  // An empty content has no text to protect and stays as it is: templates
  // test it (`{% if message.content %}`, e.g. an assistant turn with only
  // tool calls), and a sentinel would make the two renderings differ.
  auto take = [&](const std::string& path, const std::string& text, ojson* slot) {
    if (text.empty()) return;
    *slot = sentinel(contents->size());
    contents->push_back({index, path, text});
  };
  *copy = msg;
  if (copy->is_object()) {
    for (auto it = copy->begin(); it != copy->end(); ++it) {
      if (!is_content_key(it.key())) continue;
      ojson& v = it.value();
      if (v.is_string()) {
        take(base + "." + it.key(), v.get<std::string>(), &v);
      } else if (v.is_array()) {
        for (size_t p = 0; p < v.size(); ++p) {
          ojson& part = v[p];
          if (part.is_object() && part.contains("text") && part["text"].is_string())
            take(base + "." + it.key() + "[" + std::to_string(p) + "].text", part["text"].get<std::string>(),
                 &part["text"]);
        }
      }
    }
  }
  // Everything left is template logic input (role, name, ids, tool calls...).
  return check_strings(tok, *copy, base, nonce);
}

}  // namespace

Status check_template_input(const Tokenizer& tok, const nlohmann::ordered_json& value, const std::string& path) {
  return check_strings(tok, value, path, "");
}

namespace {

struct Piece {
  bool content = false;
  std::string_view text;  // template text
  size_t k = 0;           // content index
};

// The sentinel rendering cut into template text and content references.
std::vector<Piece> split_at_sentinels(std::string_view r, const std::string& nonce, size_t n_contents) {
  std::vector<Piece> out;
  size_t pos = 0;
  while (pos <= r.size()) {
    const size_t m = r.find(nonce, pos);
    if (m == std::string_view::npos) break;
    size_t q = m + nonce.size();
    size_t k = 0;
    bool ok = q < r.size() && r[q] == 'N';
    size_t digits = 0;
    for (++q; ok && q < r.size() && r[q] >= '0' && r[q] <= '9' && digits < 9; ++q, ++digits) k = k * 10 + (size_t)(r[q] - '0');
    ok = ok && digits > 0 && q < r.size() && r[q] == 'E' && k < n_contents;
    if (!ok) {  // cannot happen with an unguessable nonce; treat as text
      out.push_back({false, r.substr(pos, m + nonce.size() - pos), 0});
      pos = m + nonce.size();
      continue;
    }
    if (m > pos) out.push_back({false, r.substr(pos, m - pos), 0});
    out.push_back({true, {}, k});
    pos = q + 1;
  }
  if (pos < r.size()) out.push_back({false, r.substr(pos), 0});
  return out;
}

// Matches the pieces against the real rendering; fills the content ranges.
bool match(std::string_view real, const std::vector<Piece>& pieces, const std::vector<ContentRef>& contents,
           std::vector<Tokenizer::Span>* spans) {
  size_t pos = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (!p.content) {
      if (real.compare(pos, p.text.size(), p.text) != 0) return false;
      pos += p.text.size();
      continue;
    }
    const std::string_view full = contents[p.k].text;
    const std::string_view candidates[2] = {full, trimmed(full)};
    bool found = false;
    for (std::string_view c : candidates) {
      if (real.compare(pos, c.size(), c) != 0) continue;
      const bool next_ok = i + 1 >= pieces.size() || pieces[i + 1].content ||
                           real.compare(pos + c.size(), pieces[i + 1].text.size(), pieces[i + 1].text) == 0;
      if (!next_ok) continue;
      if (!c.empty()) spans->push_back({pos, pos + c.size()});
      pos += c.size();
      found = true;
      break;
    }
    if (!found) return false;
  }
  return pos == real.size();
}

std::string make_nonce() {
  std::random_device rd;
  const uint64_t v = ((uint64_t)rd() << 32) ^ rd();
  char buf[40];
  std::snprintf(buf, sizeof buf, "ChimeraContent%016" PRIx64, v);
  return buf;
}

}  // namespace

Result<ChatPrompt> render_chat_prompt(const ChatTemplate& tmpl, const Tokenizer& tok, const ojson& messages,
                                      const ChatRenderOptions& options, int64_t stop_at_tokens) {
  if (!messages.is_array()) return invalid_argument("chat messages must be a JSON array");
  const std::string nonce = make_nonce();
  ojson masked = ojson::array();
  std::vector<ContentRef> contents;
  for (size_t i = 0; i < messages.size(); ++i) {
    ojson copy;
    CHIMERA_RETURN_IF_ERROR(collect(messages[i], i, tok, nonce, &copy, &contents));
    masked.push_back(std::move(copy));
  }
  ChatPrompt out;
  CHIMERA_ASSIGN_OR_RETURN(out.text, tmpl.render_json(messages, options));
  out.add_special = !(!options.bos_token.empty() && out.text.compare(0, options.bos_token.size(), options.bos_token) == 0);
  out.min_tokens = tok.min_tokens(out.text) + (out.add_special && tok.add_bos() ? 1 : 0);
  if (contents.empty() || (stop_at_tokens > 0 && out.min_tokens >= stop_at_tokens)) return out;
  auto masked_text = tmpl.render_json(masked, options);
  if (masked_text.is_ok() &&
      match(out.text, split_at_sentinels(*masked_text, nonce, contents.size()), contents, &out.literal))
    return out;
  // The template rewrites contents: safe only when no content can spell a marker.
  out.literal.clear();
  for (const ContentRef& c : contents) {
    if (tok.contains_control_text(c.text))
      return invalid_argument(c.path +
                              " contains special-token text, and this chat template rewrites message contents, so "
                              "it cannot be kept as plain text; remove the marker text");
  }
  return out;
}

std::vector<TokenId> encode_chat_prompt(const Tokenizer& tok, const ChatPrompt& p) {
  return tok.encode_spans(p.text, p.literal, p.add_special);
}

}  // namespace chimera::tokenizer
