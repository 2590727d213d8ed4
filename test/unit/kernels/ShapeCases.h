//===- ShapeCases.h - transpose and box shapes for the shape kernels ------===//
//
// The shapes the shape kernels' conformance cases (shape_test.cpp) and the
// CUDA byte-equality tests (cuda_shape_test.cpp) both run.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_SHAPECASES_H
#define LLMC_TEST_UNIT_KERNELS_SHAPECASES_H

#include <cstdint>
#include <vector>

namespace llmc::test {

struct TransposeCase {
  std::vector<int64_t> shape, perm;
};

inline const std::vector<TransposeCase> kTransposes = {
    {{2, 7, 3, 13}, {0, 2, 1, 3}},   // [B,T,H,D] -> [B,H,T,D]: whole D rows
    {{2, 7, 3, 13}, {3, 1, 0, 2}},   // innermost dim moves: strided reads
    {{33, 65}, {1, 0}},              // a plain 2-D transpose
    {{7}, {0}},                      // identity
    {{1, 5, 1, 3}, {2, 3, 0, 1}},    // unit dims
    {{4, 1, 6}, {0, 2, 1}},          // a unit dim swap is a copy
    {{1}, {0}},                      // one element
    {{37, 129}, {1, 0}},             //
    {{2, 3, 4, 5, 6, 7, 2, 3}, {7, 6, 5, 4, 3, 2, 1, 0}}, // rank 8, every dim reversed
    {{3, 2, 3, 2, 3, 2, 3, 2}, {1, 0, 3, 2, 5, 4, 7, 6}}, // rank 8, pairs swapped
    {{4, 64, 12, 64}, {0, 2, 1, 3}}, // attention heads at GPT-2 width
};

struct BoxCase {
  std::vector<int64_t> shape, offsets, sizes;
};

// Odd offsets (element by element), 16-byte-aligned rows (moved as uint4 on
// the GPU), unit and whole dims.
inline const std::vector<BoxCase> kBoxes = {
    {{4, 7, 39}, {0, 0, 13}, {4, 7, 13}},
    {{4, 7, 39}, {1, 2, 0}, {2, 5, 39}},
    {{13}, {5}, {7}},
    {{3, 5, 7}, {2, 4, 6}, {1, 1, 1}},
    {{4, 7, 64}, {0, 0, 16}, {4, 7, 32}},
    {{4, 7, 64}, {1, 3, 0}, {3, 4, 64}},
    {{37, 1000}, {3, 1}, {33, 999}},
    {{1, 50257}, {0, 0}, {1, 50257}},
    {{2, 64, 2304}, {0, 0, 768}, {2, 64, 768}}, // q, k, v out of a fused qkv
};

} // namespace llmc::test

#endif
