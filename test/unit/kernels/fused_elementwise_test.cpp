//===- fused_elementwise_test.cpp - the generated elementwise loop --------===//
//
// Programs of the chains llmc-fuse forms (residual and gradient adds with a
// broadcast bias, the GELU's and SwiGLU's gradients, scale, dropout on a
// whole tensor and on a piece of one, casts) as conformance cases
// (Conformance.h): against the double reference, and on a GPU CUDA
// against the CPU. Then the CPU against its own unfused kernels, which the
// program must equal exactly in every dtype (it rounds where those kernels
// store), in place over an input, and the binding errors.

#include "Conformance.h"

#include "ElementwiseProgramBuilder.h"

namespace llmc::test {
namespace {

using ew::Opcode;

// The shapes cover a partial last chunk, a broadcast row shorter and
// longer than a chunk, and enough elements for several threads.
const std::vector<std::vector<int64_t>> kShapes = {{7}, {3, 7, 33}, {2, 1031}, {4, 64, 512}};

/// One program's case: its inputs (`shape` or a row of it, from `seed`),
/// result dtypes, step and the dropout piece's placement (global shape and
/// offsets; empty: the whole tensor). Against the reference (double, no
/// rounding between instructions): the norm metric at the tolerance of the
/// dtype the program computes in, also for a result cast to f32.
struct ProgramCase {
  std::string label;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::pair<double, bool>> inputs; ///< scale, whether a row
  std::vector<DType> results;
  ProgramBuilder program;
  int64_t step = 1;
  std::vector<int64_t> global, offsets;
  double cudaTolerance; ///< against the CPU, norm metric (0: exact)
  uint64_t seed;
};

ConformanceCase programCase(const ProgramCase &c) {
  return {"fused_elementwise", c.label + "_" + dtypeName(c.dtype) + "_" + shapeLabel(c.shape), [c] {
            KernelCall k;
            uint64_t seed = c.seed;
            for (const auto &[scale, row] : c.inputs)
              k.input(
                  randomTensor(row ? std::vector<int64_t>{c.shape.back()} : c.shape, ++seed, scale),
                  c.dtype);
            for (DType result : c.results) k.output(result, c.shape);
            k.attrs = c.program.attrs();
            if (!c.global.empty()) {
              k.attrs.setInts("global_shape", c.global);
              k.attrs.setInts("offsets", c.offsets);
            }
            k.step = c.step;
            k.reference = [c](const std::vector<RefTensor> &in) {
              return ref::fusedElementwise(in, c.shape, c.program.words, c.program.yields, c.step,
                                           c.global, c.offsets);
            };
            k.metric = Metric::Norm;
            k.tolerances = {tolerance(c.dtype)};
            k.cudaMetric = c.cudaTolerance == 0.0 ? Metric::Elementwise : Metric::Norm;
            k.cudaTolerances = {c.cudaTolerance};
            return k;
          }};
}

/// a + b + bias (a broadcast row), with the partial sum in the dtype and
/// cast to f32: sums and casts are exact on the GPU too.
ProgramCase addBias(DType t, const std::vector<int64_t> &shape, uint64_t seed) {
  ProgramBuilder p;
  int64_t r0 = p.emit(Opcode::Load, t, 0), r1 = p.emit(Opcode::Load, t, 1);
  int64_t sum = p.emit(Opcode::Add, t, r0, r1);
  int64_t rb = p.emit(Opcode::Load, t, 2);
  p.yields = {p.emit(Opcode::Add, t, sum, rb), sum, p.emit(Opcode::Cast, DType::F32, sum)};
  return {"add_bias",
          t,
          shape,
          {{1.0, false}, {1.0, false}, {1.0, true}},
          {t, t, DType::F32},
          p,
          1,
          {},
          {},
          0.0,
          seed};
}

/// res + dropout(scale(gelu_grad(x, dy))) and the dropout alone, swiglu,
/// both halves of its gradient and silu_grad. The GPU uses expf where the
/// CPU uses its polynomial: the activation kernels' tolerance (norm, the
/// dtype's); dropout's mask is shared code.
ProgramCase activations(DType t, const std::vector<int64_t> &shape, uint64_t seed) {
  ProgramBuilder p;
  int64_t rx = p.emit(Opcode::Load, t, 0), rdy = p.emit(Opcode::Load, t, 1),
          ru = p.emit(Opcode::Load, t, 2);
  int64_t rg = p.emit(Opcode::GeluGrad, t, rx, rdy);
  int64_t rf = p.emit(Opcode::Const, DType::F32, ew::bitsOf(0.37));
  int64_t rs = p.emit(Opcode::Mul, t, rg, rf);
  int64_t rd = p.emit(Opcode::Dropout, t, rs, 17, ew::bitsOf(0.25));
  int64_t rres = p.emit(Opcode::Load, t, 3);
  p.yields = {
      p.emit(Opcode::Add, t, rres, rd),         rd,
      p.emit(Opcode::Swiglu, t, rx, ru),        p.emit(Opcode::SwigluGradGate, t, rx, ru, rdy),
      p.emit(Opcode::SwigluGradUp, t, rx, rdy), p.emit(Opcode::SiluGrad, t, rx, rdy)};
  return {"activations",
          t,
          shape,
          {{2.5, false}, {1.0, false}, {1.0, false}, {1.0, false}},
          std::vector<DType>(6, t),
          p,
          5,
          {},
          {},
          tolerance(t),
          seed};
}

/// res + dropout(x) on a piece of a global tensor placed by global_shape
/// and offsets: the global mask. Against the CPU by norm, not bit for bit:
/// nvcc may contract the mask's product and the add into one FMA; one
/// differing mask element would be far outside.
ProgramCase droppedPiece(DType t, const std::vector<int64_t> &local,
                         const std::vector<int64_t> &global, const std::vector<int64_t> &offsets,
                         int64_t seed, int64_t step, uint64_t inputSeed) {
  ProgramBuilder p;
  int64_t rx = p.emit(Opcode::Load, t, 0), rres = p.emit(Opcode::Load, t, 1);
  int64_t rd = p.emit(Opcode::Dropout, t, rx, seed, ew::bitsOf(0.3));
  p.yields = {p.emit(Opcode::Add, t, rres, rd)};
  return {"dropout_piece_of_" + shapeLabel(global) + "_at_" + shapeLabel(offsets),
          t,
          local,
          {{1.0, false}, {1.0, false}},
          {t},
          p,
          step,
          global,
          offsets,
          tolerance(t),
          inputSeed};
}

/// The shapes cover a partial last chunk, a broadcast row shorter and
/// longer than a chunk, enough elements for several threads, and a GPT-2
/// activation. The pieces: each box of a 2 x 3 x 2 split of 4 x 6 x 34
/// (rows of 17 elements: chunks of the fused loop end mid-row), a
/// sequence-parallel piece (rows 3..5 of 8, whole rows of 33) and a box cut
/// along every dimension.
std::vector<ConformanceCase> fusedElementwiseCases() {
  const std::vector<std::vector<int64_t>> shapes = {
      {7}, {3, 7, 33}, {2, 1031}, {4, 64, 512}, {2, 1024, 768}};
  std::vector<ConformanceCase> cases;
  uint64_t seed = 9900;
  for (DType t : kFloatTypes) {
    for (const auto &shape : shapes) {
      cases.push_back(programCase(addBias(t, shape, seed += 8)));
      cases.push_back(programCase(activations(t, shape, seed += 8)));
    }
    const std::vector<int64_t> global = {4, 6, 34}, local = {2, 2, 17};
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t c = 0; c < 2; ++c)
          cases.push_back(
              programCase(droppedPiece(t, local, global, {a * 2, b * 2, c * 17}, 9, 4, seed += 8)));
    cases.push_back(
        programCase(droppedPiece(t, {2, 3, 33}, {2, 8, 33}, {0, 3, 0}, 23, 6, seed += 8)));
    cases.push_back(
        programCase(droppedPiece(t, {2, 4, 17}, {4, 8, 34}, {2, 4, 17}, 23, 6, seed += 8)));
  }
  return cases;
}

LLMC_CONFORMANCE_CASES(FusedElementwise, fusedElementwiseCases);

TEST(FusedElementwiseKernel, AddChainWithBiasEqualsTheUnfusedAdds) {
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      std::vector<int64_t> row = {shape.back()};
      Buffer a = Buffer::of(randomTensor(shape, 1), dtype), b = Buffer::of(randomTensor(shape, 2), dtype),
             bias = Buffer::of(randomTensor(row, 3), dtype), ab(dtype, shape), unfused(dtype, shape);
      ASSERT_TRUE(runKernel("add", {&a, &b}, {&ab}));
      ASSERT_TRUE(runKernel("add", {&ab, &bias}, {&unfused}));

      ProgramBuilder p;
      int64_t r0 = p.emit(Opcode::Load, dtype, 0), r1 = p.emit(Opcode::Load, dtype, 1);
      int64_t sum = p.emit(Opcode::Add, dtype, r0, r1);
      int64_t r3 = p.emit(Opcode::Load, dtype, 2);
      p.yields = {p.emit(Opcode::Add, dtype, sum, r3), sum};
      Buffer out(dtype, shape), partial(dtype, shape);
      out.poison(), partial.poison();
      ASSERT_TRUE(runKernel("fused_elementwise", {&a, &b, &bias}, {&out, &partial}, p.attrs()));
      EXPECT_EQ(out.toRef().data, unfused.toRef().data);
      EXPECT_EQ(partial.toRef().data, ab.toRef().data);
    }
}

TEST(FusedElementwiseKernel, ActivationGradientsScaleAndDropoutEqualTheUnfusedKernels) {
  const double factor = 0.37, rate = 0.25;
  const int64_t seed = 17, step = 5;
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      Buffer x = Buffer::of(randomTensor(shape, 11, 2.5), dtype),
             dy = Buffer::of(randomTensor(shape, 12), dtype),
             res = Buffer::of(randomTensor(shape, 13), dtype);
      // out = res + dropout(scale(gelu_grad(x, dy))), and silu_grad alongside.
      Buffer g(dtype, shape), s(dtype, shape), d(dtype, shape), unfused(dtype, shape),
          silu(dtype, shape);
      ASSERT_TRUE(runKernel("gelu_grad", {&x, &dy}, {&g}));
      ASSERT_TRUE(runKernel("scale", {&g}, {&s}, attrs({{"factor", factor}})));
      ASSERT_TRUE(runKernel("dropout", {&s}, {&d}, attrs({{"rate", rate}}, {{"seed", seed}}), step));
      ASSERT_TRUE(runKernel("add", {&res, &d}, {&unfused}));
      ASSERT_TRUE(runKernel("silu_grad", {&x, &dy}, {&silu}));

      ProgramBuilder p;
      int64_t rx = p.emit(Opcode::Load, dtype, 0), rdy = p.emit(Opcode::Load, dtype, 1);
      int64_t rg = p.emit(Opcode::GeluGrad, dtype, rx, rdy);
      int64_t rf = p.emit(Opcode::Const, DType::F32, ew::bitsOf(factor));
      int64_t rs = p.emit(Opcode::Mul, dtype, rg, rf);
      int64_t rd = p.emit(Opcode::Dropout, dtype, rs, seed, ew::bitsOf(rate));
      int64_t rres = p.emit(Opcode::Load, dtype, 2);
      p.yields = {p.emit(Opcode::Add, dtype, rres, rd), p.emit(Opcode::SiluGrad, dtype, rx, rdy)};
      Buffer out(dtype, shape), siluOut(dtype, shape);
      out.poison(), siluOut.poison();
      ASSERT_TRUE(runKernel("fused_elementwise", {&x, &dy, &res}, {&out, &siluOut}, p.attrs(), step));
      EXPECT_EQ(out.toRef().data, unfused.toRef().data);
      EXPECT_EQ(siluOut.toRef().data, silu.toRef().data);
    }
}

TEST(FusedElementwiseKernel, DropoutOnAPieceDrawsTheGlobalMaskAsTheDropoutKernel) {
  // res + dropout(x) on each box of a 2 x 3 x 2 split of a 4 x 6 x 34
  // tensor (rows of 17 elements: chunks of the fused loop end mid-row),
  // placed by global_shape/offsets, must equal the sharded dropout kernel
  // then the add, bit for bit.
  const std::vector<int64_t> global = {4, 6, 34}, pieces = {2, 3, 2};
  const std::vector<int64_t> local = {global[0] / pieces[0], global[1] / pieces[1],
                                      global[2] / pieces[2]};
  const double rate = 0.3;
  const int64_t seed = 9, step = 4;
  for (DType dtype : kFloatTypes)
    for (int64_t a = 0; a < pieces[0]; ++a)
      for (int64_t b = 0; b < pieces[1]; ++b)
        for (int64_t c = 0; c < pieces[2]; ++c) {
          std::vector<int64_t> offsets = {a * local[0], b * local[1], c * local[2]};
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " at " + shapeString(offsets));
          Buffer x = Buffer::of(randomTensor(local, 40 + c), dtype),
                 res = Buffer::of(randomTensor(local, 50 + b), dtype), dropped(dtype, local),
                 unfused(dtype, local);
          KernelAttrs placed = attrs({{"rate", rate}}, {{"seed", seed}});
          placed.setInts("global_shape", global);
          placed.setInts("offsets", offsets);
          ASSERT_TRUE(runKernel("dropout", {&x}, {&dropped}, placed, step));
          ASSERT_TRUE(runKernel("add", {&res, &dropped}, {&unfused}));

          ProgramBuilder p;
          int64_t rx = p.emit(Opcode::Load, dtype, 0), rres = p.emit(Opcode::Load, dtype, 1);
          int64_t rd = p.emit(Opcode::Dropout, dtype, rx, seed, ew::bitsOf(rate));
          p.yields = {p.emit(Opcode::Add, dtype, rres, rd)};
          KernelAttrs fused = p.attrs();
          fused.setInts("global_shape", global);
          fused.setInts("offsets", offsets);
          Buffer out(dtype, local);
          out.poison();
          ASSERT_TRUE(runKernel("fused_elementwise", {&x, &res}, {&out}, fused, step));
          EXPECT_EQ(out.toRef().data, unfused.toRef().data);
        }
}

TEST(FusedElementwiseKernel, SwigluAndCastsRoundWhereTheUnfusedKernelsStore) {
  // bf16 training: gate and up in `dtype`, swiglu in `dtype`, then a cast
  // to f32; the gradient's two halves from one swiglu_grad.
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      Buffer gate = Buffer::of(randomTensor(shape, 21, 2.0), dtype),
             up = Buffer::of(randomTensor(shape, 22), dtype),
             dy = Buffer::of(randomTensor(shape, 23), dtype);
      Buffer h(dtype, shape), h32(DType::F32, shape), dgate(dtype, shape), dup(dtype, shape),
          dgate16(DType::F16, shape);
      ASSERT_TRUE(runKernel("swiglu", {&gate, &up}, {&h}));
      ASSERT_TRUE(runKernel("cast", {&h}, {&h32}));
      ASSERT_TRUE(runKernel("swiglu_grad", {&gate, &up, &dy}, {&dgate, &dup}));
      ASSERT_TRUE(runKernel("cast", {&dgate}, {&dgate16}));

      ProgramBuilder p;
      int64_t rg = p.emit(Opcode::Load, dtype, 0), ru = p.emit(Opcode::Load, dtype, 1),
              rdy = p.emit(Opcode::Load, dtype, 2);
      int64_t rh = p.emit(Opcode::Swiglu, dtype, rg, ru);
      int64_t rh32 = p.emit(Opcode::Cast, DType::F32, rh);
      int64_t rdg = p.emit(Opcode::SwigluGradGate, dtype, rg, ru, rdy);
      int64_t rdu = p.emit(Opcode::SwigluGradUp, dtype, rg, rdy);
      p.yields = {rh32, rdu, p.emit(Opcode::Cast, DType::F16, rdg)};
      Buffer outH(DType::F32, shape), outDup(dtype, shape), outDgate(DType::F16, shape);
      outH.poison(), outDup.poison(), outDgate.poison();
      ASSERT_TRUE(runKernel("fused_elementwise", {&gate, &up, &dy}, {&outH, &outDup, &outDgate},
                            p.attrs()));
      EXPECT_EQ(outH.toRef().data, h32.toRef().data);
      EXPECT_EQ(outDup.toRef().data, dup.toRef().data);
      EXPECT_EQ(outDgate.toRef().data, dgate16.toRef().data);
    }
}

TEST(FusedElementwiseKernel, WritesInPlaceOverAnInput) {
  // LowerToExec places a result over an input that dies at the op: each
  // element is read before it is written, so the result is the same.
  for (DType dtype : kFloatTypes)
    for (const auto &shape : kShapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape));
      Buffer a = Buffer::of(randomTensor(shape, 31), dtype), b = Buffer::of(randomTensor(shape, 32), dtype),
             separate(dtype, shape);
      ProgramBuilder p;
      int64_t r0 = p.emit(Opcode::Load, dtype, 0), r1 = p.emit(Opcode::Load, dtype, 1);
      int64_t g = p.emit(Opcode::GeluGrad, dtype, r0, r1);
      p.yields = {p.emit(Opcode::Add, dtype, g, r1)};
      ASSERT_TRUE(runKernel("fused_elementwise", {&a, &b}, {&separate}, p.attrs()));
      ASSERT_TRUE(runKernel("fused_elementwise", {&a, &b}, {&b}, p.attrs()));
      EXPECT_EQ(b.toRef().data, separate.toRef().data);
    }
}

TEST(FusedElementwiseKernel, BindingErrorsNameTheProblem) {
  TensorView x = typeOnly(DType::F32, {4, 8}), bias = typeOnly(DType::F32, {8}),
             y = typeOnly(DType::F32, {4, 8});
  ProgramBuilder ok;
  int64_t a = ok.emit(Opcode::Load, DType::F32, 0), b = ok.emit(Opcode::Load, DType::F32, 1);
  ok.yields = {ok.emit(Opcode::Add, DType::F32, a, b)};
  EXPECT_EQ(bindError("fused_elementwise", {x, bias}, {y}, ok.attrs()), "");
  EXPECT_NE(bindError("fused_elementwise", {x, typeOnly(DType::F32, {4})}, {y}, ok.attrs())
                .find("input 1 f32[4] must have the outputs' shape or a suffix of it"),
            std::string::npos);
  EXPECT_NE(bindError("fused_elementwise", {x, typeOnly(DType::BF16, {8})}, {y}, ok.attrs())
                .find("instruction 1: load's dtype must be input 1's"),
            std::string::npos);
  EXPECT_NE(bindError("fused_elementwise", {x, bias}, {typeOnly(DType::BF16, {4, 8})}, ok.attrs())
                .find("result 0's element type is not register 2's dtype"),
            std::string::npos);
  ProgramBuilder forward;
  forward.emit(Opcode::Add, DType::F32, 0, 1);
  forward.yields = {0};
  EXPECT_NE(bindError("fused_elementwise", {x, bias}, {y}, forward.attrs())
                .find("instruction 0: add reads register 0, which is not defined before it"),
            std::string::npos);
  ProgramBuilder unknown = ok;
  unknown.words[0] = 99;
  EXPECT_NE(bindError("fused_elementwise", {x, bias}, {y}, unknown.attrs())
                .find("instruction 0: unknown opcode 99"),
            std::string::npos);
  KernelAttrs unplaced = ok.attrs();
  unplaced.setInts("global_shape", {8, 8});
  unplaced.setInts("offsets", {4, 0});
  EXPECT_NE(bindError("fused_elementwise", {x, bias}, {y}, unplaced)
                .find("global_shape and offsets place dropout's mask, but the program has no "
                      "dropout"),
            std::string::npos);
  ProgramBuilder dropout;
  dropout.yields = {dropout.emit(Opcode::Dropout, DType::F32,
                                 dropout.emit(Opcode::Load, DType::F32, 0), 1, ew::bitsOf(0.1))};
  KernelAttrs outside = dropout.attrs();
  outside.setInts("global_shape", {8, 8});
  outside.setInts("offsets", {6, 0});
  EXPECT_NE(bindError("fused_elementwise", {x}, {y}, outside)
                .find("dimension 0: a piece of 4 at offset 6 does not fit in 8"),
            std::string::npos);
  ProgramBuilder noProgram;
  EXPECT_NE(bindError("fused_elementwise", {x}, {y}, noProgram.attrs()).find("program"),
            std::string::npos);
}

} // namespace
} // namespace llmc::test
