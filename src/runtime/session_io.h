// A sequence (SequenceSession: state, last logits, token history, pending
// tokens) as bytes and back, for embedders that park a conversation and
// resume it later (the C API's chimera_state_save / chimera_state_load).
//
// Format (little-endian, version 1):
//   "CHIMSEQ\0"  u32 version  u32 0
//   str arch     i64 n_vocab  i64 n_embd  i64 n_layer  i64 n_past
//   u64 n_history  i32 × n      u64 n_pending  i32 × n
//   u8 have_logits  [f32 × n_vocab]
//   per layer: u8 kind (0 none, 1 kv, 2 recurrent, 3 ring) + its dims + its floats
//     kv: i64 n_embd_k, i64 n_embd_v, then n_past K rows and n_past V rows
//     recurrent: i64 conv_channels, i64 conv_rows, i64 ssm_floats, conv floats, ssm floats
//     ring: i64 n_embd_k, i64 n_embd_v, i64 window, i64 rows, then rows K rows and rows V rows
//   u64 FNV-1a 64 of every byte before it
// Loading checks everything against the model and the target session
// (architecture, sizes, each layer's kind and dims, n_past <= n_ctx, token ids,
// the history/pending invariant, the checksum): a blob that is truncated,
// corrupted, of another version or from another model is an error and leaves
// the target unchanged; it never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/status.h"
#include "models/model.h"
#include "runtime/generator.h"

namespace chimera::runtime {

inline constexpr uint32_t kSessionFormatVersion = 1;

// Bytes save_session() writes for s.
size_t session_bytes(const models::Model& m, const SequenceSession& s);
// Writes exactly session_bytes(m, s) bytes to out (out.size() must be at least that).
Status save_session(const models::Model& m, const SequenceSession& s, std::span<uint8_t> out);
// Replaces *into (its state keeps its n_ctx) with the saved sequence.
Status load_session(const models::Model& m, std::span<const uint8_t> blob, SequenceSession* into);

}  // namespace chimera::runtime
