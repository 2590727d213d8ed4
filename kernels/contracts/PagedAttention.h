//===- PagedAttention.h - binding contract of the paged KV cache -*- C++ -*-===//
//
// The checks and derived dimensions of kv_cache_write (new keys or values
// [B, T, KV, D] scattered into a pool of pages [NB, P, KV, D] through a
// block table [B, M] at token positions [B, T]) and of paged_attention
// (q [B, T, H, D] attending causally to the keys of its own sequence held
// in such a pool), shared by the CPU factories (kernels/cpu/
// paged_attention.cpp) and the CUDA ones (kernels/cuda/paged_attention.cu,
// which add their head-dim and grid limits).
//
// A pool holds the compute type (new's, q's), a 16-bit float under f32, or
// int8 codes (u8 buffers, two's complement) with a scale pool [NB, P, KV]
// f32 per pool: kv_cache_write(codes, new, block_table, positions, scales)
// -> (codes', scales') and paged_attention(q, k_codes, v_codes,
// block_table, positions, k_scales, v_scales) -> out.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_PAGEDATTENTION_H
#define LLMC_KERNELS_CONTRACTS_PAGEDATTENTION_H

#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// kv_cache_write(cache, new, block_table, positions) -> cache' and
/// paged_attention(q, k_cache, v_cache, block_table, positions) -> out.
struct PagedCacheBinding {
  DType dtype = DType::F32;      ///< the compute type: new's (kv_cache_write), q's
  DType cacheDType = DType::F32; ///< the pools': dtype, BF16/F16 under F32, or U8 (int8)
  bool quantized = false;        ///< int8 codes with scale pools
  int64_t b = 0, t = 0;     ///< batch rows and tokens per row
  int64_t h = 0;            ///< query heads (paged_attention; KV for kv_cache_write)
  int64_t kv = 0, d = 0;
  int64_t group = 1;     ///< query heads per kv head, H / KV
  int64_t blocks = 0;    ///< NB, pages in the pool
  int64_t page = 0;      ///< P, tokens per page
  int64_t maxBlocks = 0; ///< M, pages a sequence may address
  float scale = 1.0f;
  DType tableDType = DType::I32;    ///< block_table's (i32 or i64)
  DType positionDType = DType::I32; ///< positions' (i32 or i64)
};
bool bindKvCacheWrite(const KernelArgs &args, std::string &error, PagedCacheBinding *out);
bool bindPagedAttention(const KernelArgs &args, std::string &error, PagedCacheBinding *out);

} // namespace llmc::contracts

#endif
