// GgufValue helpers: typed access, construction, comparison and display.
// Invariant kept by the reader and the from_* constructors: unsigned types set
// both `u` and `i`, signed types set `i` only, floats set `f`, bool sets u=i=0/1.
#include <cstdio>
#include <cstring>

#include "format/gguf/gguf.h"

namespace chimera::format {

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "u8";
    case GgufType::INT8: return "i8";
    case GgufType::UINT16: return "u16";
    case GgufType::INT16: return "i16";
    case GgufType::UINT32: return "u32";
    case GgufType::INT32: return "i32";
    case GgufType::FLOAT32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "str";
    case GgufType::ARRAY: return "arr";
    case GgufType::UINT64: return "u64";
    case GgufType::INT64: return "i64";
    case GgufType::FLOAT64: return "f64";
  }
  return "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
    case GgufType::BOOL:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> GgufValue::as_int() const {
  if (!is_integer()) return std::nullopt;
  if (type == GgufType::UINT64 && u > (uint64_t)INT64_MAX) return std::nullopt;
  return i;
}

std::optional<double> GgufValue::as_double() const {
  if (is_float()) return f;
  if (type == GgufType::UINT64) return (double)u;
  if (is_integer()) return (double)i;
  return std::nullopt;
}

std::string GgufValue::to_display(size_t max_items) const {
  char buf[64];
  switch (type) {
    case GgufType::STRING: {
      std::string s2 = s.size() > 80 ? s.substr(0, 77) + "..." : s;
      std::string out = "\"";
      for (char ch : s2) {
        if (ch == '\n') out += "\\n";
        else if (ch == '"') out += "\\\"";
        else if ((unsigned char)ch < 0x20) out += '?';
        else out += ch;
      }
      return out + "\"";
    }
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      std::snprintf(buf, sizeof buf, "%g", f);
      return buf;
    case GgufType::BOOL: return u ? "true" : "false";
    case GgufType::UINT64: return std::to_string(u);
    case GgufType::ARRAY: {
      std::string out = std::string("[") + gguf_type_name(elem_type) + " x " + std::to_string(arr.size()) + "]";
      if (!arr.empty()) {
        out += " {";
        // Nested arrays get half the item budget per level, so the text stays
        // short (an 8-deep array would otherwise expand to max_items^8 items).
        const size_t inner = max_items > 1 ? max_items / 2 : 1;
        size_t k = 0;
        for (; k < arr.size() && k < max_items; ++k) {
          if (k) out += ", ";
          out += arr[k].to_display(elem_type == GgufType::ARRAY ? inner : max_items);
        }
        if (k < arr.size()) out += ", ...";
        out += "}";
      }
      return out;
    }
    default: return std::to_string(i);
  }
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type != o.type) return false;
  switch (type) {
    case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: case GgufType::UINT64:
    case GgufType::BOOL:
      return u == o.u;
    case GgufType::INT8: case GgufType::INT16: case GgufType::INT32: case GgufType::INT64:
      return i == o.i;
    case GgufType::FLOAT32: {
      const float a = (float)f, b = (float)o.f;
      return std::memcmp(&a, &b, sizeof a) == 0;
    }
    case GgufType::FLOAT64: return std::memcmp(&f, &o.f, sizeof f) == 0;
    case GgufType::STRING: return s == o.s;
    case GgufType::ARRAY: return elem_type == o.elem_type && arr == o.arr;
  }
  return false;
}

GgufValue GgufValue::from_u8(uint8_t v) { GgufValue x; x.type = GgufType::UINT8; x.u = v; x.i = v; return x; }
GgufValue GgufValue::from_i8(int8_t v) { GgufValue x; x.type = GgufType::INT8; x.i = v; return x; }
GgufValue GgufValue::from_u16(uint16_t v) { GgufValue x; x.type = GgufType::UINT16; x.u = v; x.i = v; return x; }
GgufValue GgufValue::from_i16(int16_t v) { GgufValue x; x.type = GgufType::INT16; x.i = v; return x; }
GgufValue GgufValue::from_i64(int64_t v) { GgufValue x; x.type = GgufType::INT64; x.i = v; return x; }
GgufValue GgufValue::from_f64(double v) { GgufValue x; x.type = GgufType::FLOAT64; x.f = v; return x; }
GgufValue GgufValue::from_u32(uint32_t v) { GgufValue x; x.type = GgufType::UINT32; x.u = v; x.i = v; return x; }
GgufValue GgufValue::from_i32(int32_t v) { GgufValue x; x.type = GgufType::INT32; x.i = v; return x; }
GgufValue GgufValue::from_u64(uint64_t v) { GgufValue x; x.type = GgufType::UINT64; x.u = v; x.i = (int64_t)v; return x; }
GgufValue GgufValue::from_f32(float v) { GgufValue x; x.type = GgufType::FLOAT32; x.f = v; return x; }
GgufValue GgufValue::from_bool(bool v) { GgufValue x; x.type = GgufType::BOOL; x.u = v; x.i = v; return x; }
GgufValue GgufValue::from_string(std::string v) { GgufValue x; x.type = GgufType::STRING; x.s = std::move(v); return x; }
GgufValue GgufValue::from_array(GgufType elem, std::vector<GgufValue> items) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem_type = elem;
  x.arr = std::move(items);
  return x;
}
GgufValue GgufValue::from_strings(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(from_string(s));
  return from_array(GgufType::STRING, std::move(items));
}
GgufValue GgufValue::from_f32s(const std::vector<float>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (float f : v) items.push_back(from_f32(f));
  return from_array(GgufType::FLOAT32, std::move(items));
}
GgufValue GgufValue::from_i32s(const std::vector<int32_t>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (int32_t f : v) items.push_back(from_i32(f));
  return from_array(GgufType::INT32, std::move(items));
}

std::string GgufTensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t k = 0; k < ne.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(ne[k]);
  }
  return s + "]";
}

}  // namespace chimera::format
