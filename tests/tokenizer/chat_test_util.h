// Shared fixtures of the chat-template tests: the standard conversations and
// a render() that reports parse/render failures as test failures.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace chimera::tokenizer::chat_test {

inline const char* const kSys = "You are a helpful assistant.";
inline const std::vector<ChatMessage> kOneTurn = {{"system", kSys}, {"user", "Hello!"}};
inline const std::vector<ChatMessage> kTwoTurn = {
    {"system", kSys}, {"user", "Hello!"}, {"assistant", "Hi there. How can I help?"}, {"user", "What is 2+2?"}};
inline const std::vector<ChatMessage> kOneTurnNoSys = {{"user", "Hello!"}};
inline const std::vector<ChatMessage> kTwoTurnNoSys = {
    {"user", "Hello!"}, {"assistant", "Hi there. How can I help?"}, {"user", "What is 2+2?"}};

inline std::string render(const std::string& src, const std::vector<ChatMessage>& msgs, bool gen, const std::string& bos,
                   const std::string& eos, ChatRenderOptions opt = {}) {
  auto t = ChatTemplate::parse(src);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (!t.is_ok()) return "<parse error>";
  opt.add_generation_prompt = gen;
  opt.bos_token = bos;
  opt.eos_token = eos;
  auto r = t->render(msgs, opt);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r.value() : "<render error: " + r.status().message() + ">";
}

}  // namespace chimera::tokenizer::chat_test
