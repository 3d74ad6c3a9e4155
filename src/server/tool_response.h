// Tool calls in responses: the non-streamed chat.completion body with
// message.tool_calls, and the streamed tail (tool_calls deltas the way OpenAI
// sends them: per call a delta with index, id, type and name and empty
// arguments, then one with the arguments text), finish_reason "tool_calls".
#pragma once

#include <string>
#include <vector>

#include "server/openai_json.h"
#include "server/tool_call_parser.h"
#include "server/tool_request.h"

namespace chimera::server {

// `body` is completion_body()'s chat.completion for `text`: with calls in
// the text, message.content becomes the text outside them (null when
// blank), message.tool_calls the calls and finish_reason "tool_calls".
std::string with_tool_calls(const std::string& body, const std::string& text, const ToolSession& ts);

// The stream's remaining chunks (JSON after "data: ") at the end of
// generation: held content, tool_calls deltas, and the finish chunk.
std::vector<std::string> tool_stream_tail(const ResponseMeta& m, ToolStreamFilter& filter, const ToolSession& ts,
                                          FinishReason finish);

}  // namespace chimera::server
