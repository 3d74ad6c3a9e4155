// Built-in filters, tests, methods of str/dict/list values and global
// functions available to templates (see the supported list in
// tokenizer/chat_template.h). Unknown names are errors, not silent no-ops.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/value.h"

namespace chimera::tokenizer::jinja {

Result<Value> apply_filter(Evaluator& ev, const std::string& name, const Value& v, Array& args, KwArgs& kwargs);
Result<bool> apply_test(Evaluator& ev, const std::string& name, const Value& v, Array& args);
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

// Calls `obj.name(args)` for a built-in method of str / dict / list.
// Sets *found = false (and returns undefined) when there is no such method.
Result<Value> call_method(Evaluator& ev, const Value& obj, const std::string& name, Array& args, KwArgs& kwargs,
                          bool* found);

// range, namespace, dict, raise_exception; and strftime_now bound to a clock
// (`now` unset = the system clock, local time as Python's datetime.now()).
void add_builtin_globals(Scope& globals);
Value make_strftime_now(std::optional<std::time_t> now);

// Python str.format subset: {} {0} {name} with no format spec.
Result<std::string> python_format(const std::string& fmt, const Array& args, const KwArgs& kwargs);

}  // namespace chimera::tokenizer::jinja
