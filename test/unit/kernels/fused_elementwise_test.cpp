//===- fused_elementwise_test.cpp - the generated elementwise loop --------===//
//
// Programs of the chains llmc-fuse forms (residual and gradient adds with a
// broadcast bias, the GELU's and SwiGLU's gradients, scale, dropout, casts)
// against the CPU's own unfused kernels, which they must equal exactly in
// every dtype (the program rounds where those kernels store); against the
// double reference; and the binding errors.

#include "KernelTest.h"

#include "ElementwiseProgramBuilder.h"

namespace llmc::test {
namespace {

using ew::Opcode;

// The shapes cover a partial last chunk, a broadcast row shorter and
// longer than a chunk, and enough elements for several threads.
const std::vector<std::vector<int64_t>> kShapes = {{7}, {3, 7, 33}, {2, 1031}, {4, 64, 512}};

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
      EXPECT_CLOSE(out.toRef(), ref::add(ref::add(a.toRef(), b.toRef()), bias.toRef()),
                   Metric::Norm, tolerance(dtype));
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
      std::vector<RefTensor> expected = ref::fusedElementwise(
          {x.toRef(), dy.toRef(), res.toRef()}, shape, p.words, p.yields, step);
      EXPECT_CLOSE(out.toRef(), expected[0], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(siluOut.toRef(), expected[1], Metric::Norm, tolerance(dtype));
    }
}

TEST(FusedElementwiseKernel, DropoutOnAPieceDrawsTheGlobalMaskAsTheDropoutKernel) {
  // res + dropout(x) on each box of a 2 x 3 x 2 split of a 4 x 6 x 34
  // tensor (rows of 17 elements: chunks of the fused loop end mid-row),
  // placed by global_shape/offsets, must equal the sharded dropout kernel
  // then the add, bit for bit, and the reference's piece.
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
          std::vector<RefTensor> expected = ref::fusedElementwise(
              {x.toRef(), res.toRef()}, local, p.words, p.yields, step, global, offsets);
          EXPECT_CLOSE(out.toRef(), expected[0], Metric::Norm, tolerance(dtype));
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
