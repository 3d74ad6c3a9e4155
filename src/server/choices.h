// Responses with several choices (request field "n" > 1): the bodies and
// chunks of the single-choice builders (completion_body, chunk_body,
// with_tool_calls, tool_stream_tail), re-indexed and joined, and the usage
// of the whole request. Each choice is built exactly as a one-choice response
// would be, so n = 1 and choice i of n > 1 share every rule (finish_reason,
// logprobs, tool calls).
#pragma once

#include <string>
#include <vector>

#include "server/engine.h"

namespace chimera::server {

// The request's usage from its choices' final events: prompt and cached
// tokens once (the prompt was prefilled once and forked), completion tokens
// summed over the choices.
Usage request_usage(const std::vector<Usage>& per_choice);

// A stream chunk (JSON whose choices hold one entry, index 0) with that
// entry's index set to `index`; chunks without choices come back unchanged.
std::string with_choice_index(const std::string& chunk, int index);

// One response body from single-choice bodies (completion_body, maybe
// with_tool_calls): the first body's envelope and usage, the choices of all
// of them in order with index 0 .. n-1.
std::string join_choices(const std::vector<std::string>& bodies);

}  // namespace chimera::server
