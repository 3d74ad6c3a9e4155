// Internal: constructors of the concrete tokenizers (one file each: spm.cpp,
// bpe.cpp, wpm.cpp; tiktoken.cpp builds a BPE from a rank file). Not part of
// the public API; include tokenizer.h instead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace chimera::tokenizer::detail {

Result<std::unique_ptr<Tokenizer>> make_spm(const VocabSpec& spec);
Result<std::unique_ptr<Tokenizer>> make_bpe(const VocabSpec& spec);
Result<std::unique_ptr<Tokenizer>> make_wpm(const VocabSpec& spec);
Result<std::unique_ptr<Tokenizer>> make_none(const VocabSpec& spec);
// Byte-level BPE whose pair ranks are the ids of the concatenated tokens
// (tiktoken). spec.tokens are byte-level encoded; spec.merges is ignored.
Result<std::unique_ptr<Tokenizer>> make_bpe_by_rank(const VocabSpec& spec);

// llama.cpp's clean_up_tokenization_spaces on decoded text.
std::string clean_up_spaces(std::string_view text);

}  // namespace chimera::tokenizer::detail
