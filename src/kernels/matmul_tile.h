// Internal to the matmul kernels: cache blocking and micro-tile selection
// shared by every ISA. A micro-tile computes an rr x mm block of outputs
// (rr weight rows x mm activation rows) over the full dot length k, loading
// each weight vector once per mm activations. The blocking only decides which
// tile computes which outputs; since every output keeps its own accumulator
// and its own summation order (see type_traits.h), the result of y[i][r] does
// not depend on the tiling, the block sizes or the thread partition.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/type_traits.h"

#if defined(__clang__)
#define CHIMERA_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define CHIMERA_UNROLL _Pragma("GCC unroll 16")
#else
#define CHIMERA_UNROLL
#endif

namespace chimera::kernels::detail {

// Computes the kRows x kActs tile whose top-left output is (row r, act i).
using TileFn = void (*)(const GemmArgs& g, int64_t r, int64_t i);

// Tile shapes of one kernel: fn[(rr - 1) * kMaxActs + (mm - 1)] computes an
// rr x mm tile; rows_for[mm] is the preferred rr when mm activations remain
// (chosen per ISA so the accumulators fit in registers).
template <int kMaxRows, int kMaxActs>
struct TileSet {
  std::array<TileFn, kMaxRows * kMaxActs> fn{};
  std::array<int, kMaxActs + 1> rows_for{};
};

// Fills a TileSet from a kernel class K with `template <int R, int M> static
// void tile(const GemmArgs&, int64_t, int64_t)`.
template <class K, int kMaxRows, int kMaxActs>
constexpr TileSet<kMaxRows, kMaxActs> make_tile_set(std::array<int, kMaxActs + 1> rows_for) {
  TileSet<kMaxRows, kMaxActs> t;
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.fn[I] = &K::template tile<I / kMaxActs + 1, I % kMaxActs + 1>), ...);
  }(std::make_integer_sequence<int, kMaxRows * kMaxActs>{});
  t.rows_for = rows_for;
  return t;
}

// Activation rows per L2-resident block: the packed activations of one block
// are re-read for every weight micro-panel, the weights stream once per block.
inline int64_t act_block_rows(size_t a_stride, int max_acts) {
  constexpr size_t kL2Budget = 384 * 1024;
  int64_t n = (int64_t)(kL2Budget / std::max<size_t>(a_stride, 1));
  n = std::max<int64_t>(n / max_acts, 1) * max_acts;
  return n;
}

template <int kMaxRows, int kMaxActs>
inline void gemm_blocked(const TileSet<kMaxRows, kMaxActs>& ts, const GemmArgs& g, int64_t r0, int64_t r1,
                         int64_t i0, int64_t i1) {
  const int64_t ib_rows = act_block_rows(g.a_stride, kMaxActs);
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    // The tile height follows the widest tile of this block so a weight panel
    // is loaded once per block; the narrower last tile reuses it.
    const int rows = ts.rows_for[(int)std::min<int64_t>(kMaxActs, ie - ib)];
    for (int64_t r = r0; r < r1; r += rows) {
      const int rr = (int)std::min<int64_t>(rows, r1 - r);
      for (int64_t i = ib; i < ie; i += kMaxActs) {
        const int mm = (int)std::min<int64_t>(kMaxActs, ie - i);
        ts.fn[(rr - 1) * kMaxActs + (mm - 1)](g, r, i);
      }
    }
  }
}

}  // namespace chimera::kernels::detail
