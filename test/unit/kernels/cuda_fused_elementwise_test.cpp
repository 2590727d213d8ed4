//===- cuda_fused_elementwise_test.cpp - the generated loop on the GPU ----===//
//
// The programs of fused_elementwise_test.cpp on both backends: sums (with
// a broadcast bias) and casts are exact on the GPU too; the activations
// use expf where the CPU uses its polynomial, so they are compared with
// the activation kernels' tolerances; dropout's mask is shared code.

#include "CudaConformance.h"
#include "ElementwiseProgramBuilder.h"

namespace llmc::test {
namespace {

using ew::Opcode;

const std::vector<std::vector<int64_t>> kShapes = {{7}, {3, 7, 33}, {2, 1031}, {2, 1024, 768}};

TEST(CudaFusedElementwise, SumsWithABroadcastBiasEqualTheCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9900;
  for (DType t : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape));
      Buffer a = Buffer::of(randomTensor(shape, ++seed), t),
             b = Buffer::of(randomTensor(shape, ++seed), t),
             bias = Buffer::of(randomTensor({shape.back()}, ++seed), t);
      ProgramBuilder p;
      int64_t r0 = p.emit(Opcode::Load, t, 0), r1 = p.emit(Opcode::Load, t, 1);
      int64_t sum = p.emit(Opcode::Add, t, r0, r1);
      int64_t rb = p.emit(Opcode::Load, t, 2);
      p.yields = {p.emit(Opcode::Add, t, sum, rb), p.emit(Opcode::Cast, DType::F32, sum)};
      Buffer out(t, shape), wide(DType::F32, shape);
      expectCudaMatchesCpu("fused_elementwise", {&a, &b, &bias}, {&out, &wide}, p.attrs(),
                           {Metric::Elementwise, {0.0}});
    }
}

TEST(CudaFusedElementwise, ActivationsScaleAndDropoutMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9950;
  for (DType t : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape));
      Buffer x = Buffer::of(randomTensor(shape, ++seed, 2.5), t),
             dy = Buffer::of(randomTensor(shape, ++seed), t),
             up = Buffer::of(randomTensor(shape, ++seed), t);
      ProgramBuilder p;
      int64_t rx = p.emit(Opcode::Load, t, 0), rdy = p.emit(Opcode::Load, t, 1),
              ru = p.emit(Opcode::Load, t, 2);
      int64_t rg = p.emit(Opcode::GeluGrad, t, rx, rdy);
      int64_t rf = p.emit(Opcode::Const, DType::F32, ew::bitsOf(0.37));
      int64_t rs = p.emit(Opcode::Mul, t, rg, rf);
      int64_t rd = p.emit(Opcode::Dropout, t, rs, 17, ew::bitsOf(0.25));
      p.yields = {rd, p.emit(Opcode::Swiglu, t, rx, ru), p.emit(Opcode::SwigluGradGate, t, rx, ru, rdy),
                  p.emit(Opcode::SwigluGradUp, t, rx, rdy), p.emit(Opcode::SiluGrad, t, rx, rdy)};
      Buffer o0(t, shape), o1(t, shape), o2(t, shape), o3(t, shape), o4(t, shape);
      expectCudaMatchesCpu("fused_elementwise", {&x, &dy, &up}, {&o0, &o1, &o2, &o3, &o4},
                           p.attrs(), {Metric::Norm, {tolerance(t)}}, 5);
    }
}

TEST(CudaFusedElementwise, DropoutOnAPieceMatchesTheCpu) {
  // A sequence-parallel piece (rows 3..5 of 8, whole rows of 33) and a
  // box cut along every dimension: the global mask on both backends.
  LLMC_REQUIRE_GPU();
  struct Piece {
    std::vector<int64_t> local, global, offsets;
  };
  const Piece pieces[] = {{{2, 3, 33}, {2, 8, 33}, {0, 3, 0}},
                          {{2, 4, 17}, {4, 8, 34}, {2, 4, 17}}};
  uint64_t seed = 9970;
  for (DType t : kFloatTypes)
    for (const Piece &piece : pieces) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " at " + shapeString(piece.offsets));
      Buffer x = Buffer::of(randomTensor(piece.local, ++seed), t),
             res = Buffer::of(randomTensor(piece.local, ++seed), t);
      ProgramBuilder p;
      int64_t rx = p.emit(Opcode::Load, t, 0), rres = p.emit(Opcode::Load, t, 1);
      int64_t rd = p.emit(Opcode::Dropout, t, rx, 23, ew::bitsOf(0.3));
      p.yields = {p.emit(Opcode::Add, t, rres, rd)};
      KernelAttrs placed = p.attrs();
      placed.setInts("global_shape", piece.global);
      placed.setInts("offsets", piece.offsets);
      Buffer out(t, piece.local);
      // Norm, not bit-exact: nvcc may contract the mask's product and the
      // add into one FMA. One differing mask element would be far outside.
      expectCudaMatchesCpu("fused_elementwise", {&x, &res}, {&out}, placed,
                           {Metric::Norm, {tolerance(t)}}, 6);
    }
}

TEST(CudaFusedElementwise, BindingErrorsAreTheCpus) {
  LLMC_REQUIRE_GPU();
  TensorView x = typeOnly(DType::F32, {4, 8}), y = typeOnly(DType::F32, {4, 8});
  ProgramBuilder p;
  int64_t r = p.emit(Opcode::Load, DType::F32, 0);
  p.yields = {p.emit(Opcode::Add, DType::F32, r, 3)};
  EXPECT_EQ(cudaBindError("fused_elementwise", {x}, {y}, p.attrs()),
            bindError("fused_elementwise", {x}, {y}, p.attrs()));
  EXPECT_NE(cudaBindError("fused_elementwise", {x}, {y}, p.attrs()), "");
}

} // namespace
} // namespace llmc::test
