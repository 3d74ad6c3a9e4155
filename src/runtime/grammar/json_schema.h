// JSON Schema -> GBNF, covering what OpenAI's structured outputs (strict
// mode) allow, plus the generic JSON grammar behind `json_object`.
//
// Supported: type (string, number, integer, boolean, null, object, array, or a
// list of these), properties, required, additionalProperties (false; true,
// absent or a schema only matter for objects without properties — with
// declared properties the grammar produces just those, which still satisfies
// the schema), enum, const, items, minItems, maxItems, anyOf, $ref (local
// "#/..." pointers, recursion allowed) with $defs/definitions, minLength,
// maxLength (code points; an escape counts as one), integer minimum, maximum,
// exclusiveMinimum, exclusiveMaximum. Annotations (title, description,
// default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly)
// are accepted and do not constrain. Any other keyword is an error naming it
// and where it is (a JSON pointer), never silently dropped.
//
// The output is canonical-ish JSON: properties in schema order (required ones
// first), optional single spaces / a newline plus up to 20 blanks of
// indentation between tokens, numbers of at most 16 integral and 16
// fractional digits, strings of valid UTF-8 with standard escapes (never a
// lone surrogate escape), so every match parses as JSON.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace chimera::runtime::grammar {

// The schema as JSON text (an object, or the booleans true/false).
Result<std::string> json_schema_to_gbnf(std::string_view schema_json);
// Any JSON object (OpenAI `response_format: {"type": "json_object"}`).
std::string json_object_gbnf();
// GBNF for the decimal integers in [lo, hi]; has_lo/has_hi false = unbounded
// on that side (magnitude then limited to 18 digits). Precondition lo <= hi.
std::string integer_range_gbnf(bool has_lo, int64_t lo, bool has_hi, int64_t hi);

}  // namespace chimera::runtime::grammar
