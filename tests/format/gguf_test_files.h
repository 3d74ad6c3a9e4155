// Small GGUF images for the reader tests and the fuzzer's seed corpus
// (fuzz/gguf_seeds.cpp includes this header too, so it must not depend on
// GoogleTest). RawGguf writes GGUF pieces byte by byte, for files the writer
// refuses to produce; seed_files() returns valid files that together use every
// metadata value type, nested and empty arrays, v2 and v3, several alignments
// and several tensor types.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf/gguf.h"

namespace chimera::test {

// Byte-level GGUF builder (little-endian host assumed, like the reader).
struct RawGguf {
  std::vector<uint8_t> b;

  template <typename T>
  RawGguf& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  RawGguf& u8(uint8_t v) { return pod(v); }
  RawGguf& u32(uint32_t v) { return pod(v); }
  RawGguf& u64(uint64_t v) { return pod(v); }
  RawGguf& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  RawGguf& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
  RawGguf& tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32((uint32_t)ne.size());
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

// Deterministic tensor payload of n bytes.
inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (uint8_t)(seed + i * 31 + (i >> 8));
  return v;
}

// One metadata value of every type, including nested and empty arrays.
inline std::vector<std::pair<std::string, format::GgufValue>> all_type_metadata() {
  using format::GgufType;
  using format::GgufValue;
  std::vector<std::pair<std::string, GgufValue>> m;
  m.emplace_back("general.architecture", GgufValue::from_string("llama"));
  m.emplace_back("general.name", GgufValue::from_string("tiny test model"));
  m.emplace_back("t.u8", GgufValue::from_u8(250));
  m.emplace_back("t.i8", GgufValue::from_i8(-100));
  m.emplace_back("t.u16", GgufValue::from_u16(65000));
  m.emplace_back("t.i16", GgufValue::from_i16(-32000));
  m.emplace_back("t.u32", GgufValue::from_u32(4000000000u));
  m.emplace_back("t.i32", GgufValue::from_i32(-2000000000));
  m.emplace_back("t.u64", GgufValue::from_u64(18000000000000000000ull));
  m.emplace_back("t.i64", GgufValue::from_i64(-9000000000000000000ll));
  m.emplace_back("t.f32", GgufValue::from_f32(-1.5e-3f));
  m.emplace_back("t.f64", GgufValue::from_f64(3.141592653589793));
  m.emplace_back("t.bool_true", GgufValue::from_bool(true));
  m.emplace_back("t.bool_false", GgufValue::from_bool(false));
  m.emplace_back("t.str", GgufValue::from_string("hello\nworld \"quoted\""));
  m.emplace_back("t.str_empty", GgufValue::from_string(""));
  m.emplace_back("t.arr_u8", GgufValue::from_array(GgufType::UINT8, {GgufValue::from_u8(0), GgufValue::from_u8(255)}));
  m.emplace_back("t.arr_i8", GgufValue::from_array(GgufType::INT8, {GgufValue::from_i8(-128), GgufValue::from_i8(127)}));
  m.emplace_back("t.arr_u16", GgufValue::from_array(GgufType::UINT16, {GgufValue::from_u16(1)}));
  m.emplace_back("t.arr_i16", GgufValue::from_array(GgufType::INT16, {GgufValue::from_i16(-2)}));
  m.emplace_back("t.arr_u32", GgufValue::from_array(GgufType::UINT32, {GgufValue::from_u32(7), GgufValue::from_u32(0)}));
  m.emplace_back("t.arr_i32", GgufValue::from_i32s({4, 4, 0, 4}));
  m.emplace_back("t.arr_u64", GgufValue::from_array(GgufType::UINT64, {GgufValue::from_u64(~0ull)}));
  m.emplace_back("t.arr_i64", GgufValue::from_array(GgufType::INT64, {GgufValue::from_i64(INT64_MIN)}));
  m.emplace_back("t.arr_f32", GgufValue::from_f32s({0.5f, -0.25f, 1e30f}));
  m.emplace_back("t.arr_f64", GgufValue::from_array(GgufType::FLOAT64, {GgufValue::from_f64(-1e-300)}));
  m.emplace_back("t.arr_bool", GgufValue::from_array(GgufType::BOOL, {GgufValue::from_bool(true), GgufValue::from_bool(false)}));
  m.emplace_back("t.arr_str", GgufValue::from_strings({"<s>", "", "\xe2\x96\x81the"}));
  m.emplace_back("t.arr_empty_str", GgufValue::from_array(GgufType::STRING, {}));
  m.emplace_back("t.arr_empty_f32", GgufValue::from_array(GgufType::FLOAT32, {}));
  m.emplace_back("t.arr_of_arr",
                 GgufValue::from_array(GgufType::ARRAY, {GgufValue::from_i32s({1, 2}), GgufValue::from_i32s({}),
                                                         GgufValue::from_strings({"x"})}));
  m.emplace_back("t.arr_of_empty_arr", GgufValue::from_array(GgufType::ARRAY, {GgufValue::from_array(GgufType::UINT8, {})}));
  m.emplace_back("t.arr_nested3",
                 GgufValue::from_array(GgufType::ARRAY, {GgufValue::from_array(
                                                            GgufType::ARRAY, {GgufValue::from_f32s({2.0f})})}));
  m.emplace_back("llama.block_count", GgufValue::from_u32(2));
  m.emplace_back("llama.context_length", GgufValue::from_u32(256));
  m.emplace_back("llama.embedding_length", GgufValue::from_u32(64));
  m.emplace_back("llama.attention.head_count", GgufValue::from_u32(4));
  m.emplace_back("llama.attention.head_count_kv", GgufValue::from_i32s({2, 1}));
  return m;
}

// A small valid model: every metadata type plus F32, F16, Q8_0 and Q4_K tensors.
inline format::GgufWriter small_model_writer(uint32_t version = 3, uint32_t alignment = 32,
                                             bool with_metadata = true, bool with_tensors = true) {
  using format::GgmlType;
  format::GgufWriter w(version);
  if (alignment != 32) w.set_alignment(alignment);
  if (with_metadata)
    for (auto& [k, v] : all_type_metadata()) w.set(k, v);
  if (with_tensors) {
    (void)w.add_tensor_copy("token_embd.weight", GgmlType::F32, {8, 4}, pattern_bytes(8 * 4 * 4, 1));
    (void)w.add_tensor_copy("blk.0.attn_norm.weight", GgmlType::F32, {8}, pattern_bytes(8 * 4, 2));
    (void)w.add_tensor_copy("blk.0.ffn_up.weight", GgmlType::F16, {8, 3, 1, 2}, pattern_bytes(8 * 3 * 2 * 2, 3));
    (void)w.add_tensor_copy("blk.0.attn_q.weight", GgmlType::Q8_0, {32, 2}, pattern_bytes(34 * 2, 4));
    (void)w.add_tensor_copy("output.weight", GgmlType::Q4_K, {256, 1}, pattern_bytes(144, 5));
  }
  return w;
}

inline std::vector<uint8_t> small_model_gguf(uint32_t version = 3, uint32_t alignment = 32) {
  return small_model_writer(version, alignment).to_bytes();
}

// Valid seed files for fuzzing, with names.
inline std::vector<std::pair<std::string, std::vector<uint8_t>>> seed_files() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> s;
  s.emplace_back("small-v3.gguf", small_model_gguf(3));
  s.emplace_back("small-v2.gguf", small_model_gguf(2));
  s.emplace_back("small-align1.gguf", small_model_gguf(3, 1));
  s.emplace_back("small-align64.gguf", small_model_gguf(3, 64));
  s.emplace_back("metadata-only.gguf", small_model_writer(3, 32, true, false).to_bytes());
  s.emplace_back("tensors-only.gguf", small_model_writer(3, 32, false, true).to_bytes());
  s.emplace_back("empty.gguf", format::GgufWriter(3).to_bytes());
  {
    format::GgufWriter w(3);
    w.set("general.architecture", format::GgufValue::from_string("mamba"));
    w.set("tokenizer.ggml.tokens", format::GgufValue::from_strings({"a", "b", "c", "<unk>"}));
    w.set("tokenizer.ggml.scores", format::GgufValue::from_f32s({0.f, -1.f, -2.f, -3.f}));
    w.set("tokenizer.ggml.token_type", format::GgufValue::from_i32s({1, 1, 1, 2}));
    (void)w.add_tensor_copy("a", format::GgmlType::BF16, {4, 4}, pattern_bytes(32, 9));
    (void)w.add_tensor_copy("b", format::GgmlType::I32, {3}, pattern_bytes(12, 10));
    (void)w.add_tensor_copy("c", format::GgmlType::TQ2_0, {256}, pattern_bytes(66, 11));
    s.emplace_back("vocab.gguf", w.to_bytes());
  }
  return s;
}

// Writes seed_files() into dir (created if needed); returns false on I/O error.
inline bool write_seed_corpus(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  for (const auto& [name, bytes] : seed_files()) {
    std::ofstream f(std::filesystem::path(dir) / name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), (std::streamsize)bytes.size());
    if (!f) return false;
  }
  return true;
}

}  // namespace chimera::test
