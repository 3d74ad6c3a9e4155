// ChatTemplate: builds the apply_chat_template context for the Jinja
// interpreter and recognises common template families. See chat_template.h.
#include "tokenizer/chat_template.h"

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/template.h"

namespace chimera::tokenizer {
namespace {

constexpr const char* kFallbackSource =
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string detect_family(const std::string& src) {
  if (has(src, "<|start_of_role|>")) return "granite";
  if (has(src, "<|start_header_id|>")) return "llama3";
  if (has(src, "<<SYS>>")) return "llama2";
  if (has(src, "[INST]")) return "mistral";
  if (has(src, "<start_of_turn>")) return "gemma";
  if (has(src, "<|im_start|>")) return "chatml";
  if (has(src, "<|end|>") && has(src, "<|assistant|>")) return has(src, "<|tool|>") ? "phi4" : "phi3";
  if (has(src, "<|user|>") && has(src, "<|assistant|>")) return "zephyr";
  return "unknown";
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  auto t = jinja::Template::parse(source);
  if (!t.is_ok()) return t.status().with_context("chat template");
  ChatTemplate ct;
  ct.source_ = source;
  ct.family_ = detect_family(source);
  ct.tmpl_ = std::make_shared<const jinja::Template>(std::move(t).value());
  return ct;
}

ChatTemplate ChatTemplate::fallback() {
  auto t = parse(kFallbackSource);
  CHIMERA_CHECK(t.is_ok());
  ChatTemplate ct = std::move(t).value();
  ct.family_ = "fallback";
  return ct;
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                         const std::string& bos_token, const std::string& eos_token) const {
  ChatRenderOptions opt;
  opt.add_generation_prompt = add_generation_prompt;
  opt.bos_token = bos_token;
  opt.eos_token = eos_token;
  return render(messages, opt);
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                         const ChatRenderOptions& options) const {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) j.push_back({{"role", m.role}, {"content", m.content}});
  return render_json(j, options);
}

Result<std::string> ChatTemplate::render_json(const nlohmann::ordered_json& messages,
                                              const ChatRenderOptions& options) const {
  if (!tmpl_) return invalid_argument("chat template is empty");
  if (!messages.is_array()) return invalid_argument("chat messages must be a JSON array");
  if (!options.extra_context.is_object() && !options.extra_context.is_null())
    return invalid_argument("chat template extra context must be a JSON object");
  jinja::Scope vars;
  CHIMERA_ASSIGN_OR_RETURN(vars["messages"], jinja::from_json(messages));
  vars["add_generation_prompt"] = jinja::Value::boolean(options.add_generation_prompt);
  vars["bos_token"] = jinja::Value::string(options.bos_token);
  vars["eos_token"] = jinja::Value::string(options.eos_token);
  if (options.extra_context.is_object()) {
    for (auto it = options.extra_context.begin(); it != options.extra_context.end(); ++it) {
      CHIMERA_ASSIGN_OR_RETURN(vars[it.key()], jinja::from_json(it.value()));
    }
  }
  jinja::Scope globals;
  globals["strftime_now"] = jinja::make_strftime_now(options.now);
  auto out = tmpl_->render(std::move(vars), globals, options.limits);
  if (!out.is_ok()) return out.status().with_context("chat template");
  return out;
}

}  // namespace chimera::tokenizer
