//===- ArtifactTest.cpp - loading, verifying and binding artifacts --------===//

#include "TestUtil.h"
#include "common/ArtifactFormat.h"
#include "common/schema/artifact_generated.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/Init.h"
#include "runtime/support/Error.h"

#include <cstring>

#include <cmath>

using namespace llmc;

namespace {

struct Spec {
  std::string kernel = "fill";
  uint64_t bufferOffset = 0;
  uint32_t outputIndex = 0;
  uint64_t arena = 1024;
  uint32_t version = kArtifactSchemaVersion;
  std::string rankOffsetAttr; ///< non-empty: a rank offset term on this attribute
  int32_t rankOffsetIndex = 0;
  bool faultSite = false;                ///< mark the kernel as the fault-injection site
  fb::DType outputDType = fb::DType::F32; ///< of buffer 0
  int32_t channel = 0; ///< the kernel's transfer channel (none is valid)
  uint64_t host = 0;       ///< bytes of host memory after the arena
  uint64_t hostOptimizerState = 0, hostActivations = 0, hostWeights = 0; ///< parts of it
  bool outputHost = false; ///< buffer 0 is in host memory
  bool onHost = false;     ///< the kernel runs on the host
  fb::OpKind kind = fb::OpKind::Kernel; ///< of the instruction
};

/// A one-program artifact: `kernel` writes buffer 0 (f32[4x8]).
std::string build(const Spec &spec) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.ForceDefaults(true);
  auto buffer =
      fb::CreateBuffer(fbb, fbb.CreateString("out"), fbb.CreateString("output"), spec.bufferOffset,
                       spec.outputDType, fbb.CreateVector(std::vector<int64_t>{4, 8}), 0, 0,
                       spec.outputHost ? fb::MemorySpace::Host : fb::MemorySpace::Device);
  auto param = fb::CreateBuffer(fbb, fbb.CreateString("w"), fbb.CreateString("param"), 512,
                                fb::DType::F32, fbb.CreateVector(std::vector<int64_t>{16}));
  std::vector<flatbuffers::Offset<fb::FloatAttr>> floats = {
      fb::CreateFloatAttr(fbb, fbb.CreateString("value"), 2.5)};
  std::vector<flatbuffers::Offset<fb::IntAttr>> ints = {
      fb::CreateIntAttr(fbb, fbb.CreateString("offset"), 3)};
  std::vector<flatbuffers::Offset<fb::RankOffset>> terms;
  if (!spec.rankOffsetAttr.empty())
    terms.push_back(fb::CreateRankOffset(
        fbb, fbb.CreateString(spec.rankOffsetAttr), spec.rankOffsetIndex,
        fbb.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{fbb.CreateString("tp")}),
        16));
  auto inst = fb::CreateInstruction(
      fbb, spec.kind, fbb.CreateString(spec.kernel), fbb.CreateVector(std::vector<uint32_t>{}),
      fbb.CreateVector(std::vector<uint32_t>{spec.outputIndex}), fbb.CreateVector(ints),
      fbb.CreateVector(floats), 0, 0, 0, 0, 0, 0, 0, 0, 0, fbb.CreateString("model.mlir:3:5"),
      fbb.CreateVector(terms), fbb.CreateString("F0"), spec.faultSite, spec.channel, spec.onHost);
  auto program = fb::CreateProgram(fbb, fbb.CreateString("train_step"),
                                   fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Buffer>>{buffer, param}),
                                   fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Instruction>>{inst}), 128);
  auto parameter = fb::CreateParameter(fbb, fbb.CreateString("w"),
                                       fbb.CreateVector(std::vector<int64_t>{16}), fb::DType::F32, 512,
                                       fbb.CreateString("normal"), 0.5, true);
  auto memory =
      fb::CreateMemoryPlan(fbb, spec.arena, 0, spec.arena, 0, 0, 0, 0, 0, spec.host,
                           spec.hostOptimizerState, spec.hostActivations, spec.hostWeights);
  auto role = fb::CreateRole(fbb, fbb.CreateVector(std::vector<int32_t>{0}),
                             fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Program>>{program}),
                             fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Parameter>>{parameter}),
                             memory);
  std::vector<flatbuffers::Offset<fb::KeyValue>> kv = {
      fb::CreateKeyValue(fbb, fbb.CreateString("seed"), fbb.CreateString("99"))};
  auto artifact = fb::CreateArtifact(fbb, spec.version, 0, fbb.CreateString("test"),
                                     fbb.CreateString("cpu"), 0, 1,
                                     fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Role>>{role}),
                                     fbb.CreateVector(kv));
  fb::FinishArtifactBuffer(fbb, artifact);
  std::string bytes(reinterpret_cast<const char *>(fbb.GetBufferPointer()), fbb.GetSize());
  uint64_t hash = fnv1a64(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  fb::GetMutableArtifact(bytes.data())->mutate_content_hash(hash);
  return bytes;
}

} // namespace

TEST(Artifact, LoadsBindsAndRuns) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({}));
  Artifact a = loadArtifact(path);
  EXPECT_EQ(a.backend, "cpu");
  EXPECT_EQ(a.metaNumber("seed", 0), 99);
  ASSERT_TRUE(a.program("train_step"));
  EXPECT_EQ(a.program("train_step")->instructions[0].attrs.getFloat("value"), 2.5);
  auto device = makeCpuDevice(a.memory.arenaBytes);
  auto comm = makeSingleRankCommunicator();
  BoundProgram p(*a.program("train_step"), *device, *comm, 0);
  p.run(StepContext{1});
  TensorView out = p.view("out");
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.as<float>()[i], 2.5f);
  EXPECT_RUNTIME_ERROR(p.view("nope"), "has no buffer named 'nope'");
}

TEST(Artifact, RefusesToWriteAParameterReadInPlace) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({}));
  Artifact a = loadArtifact(path);
  auto device = makeCpuDevice(a.memory.arenaBytes);
  auto comm = makeSingleRankCommunicator();
  const BufferInfo &out = a.program("train_step")->buffers[0];
  ASSERT_EQ(out.name, "out");
  std::vector<uint8_t> file(out.bytes());
  device->hostArena().placeOutside(out.offset, out.bytes(), file.data());
  EXPECT_RUNTIME_ERROR(BoundProgram(*a.program("train_step"), *device, *comm, 0),
                       "writes 'out', which is read in place from its weights file");
}

TEST(Artifact, CorruptionIsDetected) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  std::string good = build({});

  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x01;
  test::writeBytes(path, flipped);
  EXPECT_THROW(loadArtifact(path), RuntimeError);

  test::writeBytes(path, good.substr(0, good.size() / 2));
  EXPECT_THROW(loadArtifact(path), RuntimeError);

  test::writeBytes(path, "not an artifact at all");
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "missing the 'LLMC' file identifier");

  EXPECT_RUNTIME_ERROR(loadArtifact(dir.file("absent.llmc")), "cannot open artifact");
}

TEST(Artifact, HashMismatchNamesBothHashes) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  std::string bytes = build({});
  // Change a metadata value in place: still a valid FlatBuffer, wrong hash.
  size_t at = bytes.find("99");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = '7';
  test::writeBytes(path, bytes);
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "content_hash mismatch");
}

TEST(Artifact, SemanticChecksNameTheField) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({.bufferOffset = 2048}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "program 'train_step' buffer 0 ('out'): bytes [2048, 2176) lie outside the arena of 1024 bytes");
  test::writeBytes(path, build({.bufferOffset = 2}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "buffer 0 ('out'): offset 2 is not aligned to its 4-byte elements");
  // An offset near 2^64 must not wrap around the arena check.
  test::writeBytes(path, build({.bufferOffset = ~uint64_t(0) - 8}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "buffer 0 ('out'): offset 18446744073709551607 lies outside the arena of 1024 bytes");
  test::writeBytes(path, build({.outputIndex = 9}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "instruction 0: output buffer index 9 out of range (2 buffers)");
  test::writeBytes(path, build({.version = 999}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "schema_version 999 is not compatible");
  test::writeBytes(path, build({.rankOffsetAttr = "value"}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "instruction 0: rank offset for attribute 'value', "
                                           "which the instruction does not have as an int or int array");
  test::writeBytes(path, build({.rankOffsetAttr = "offset", .rankOffsetIndex = 1}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "rank offset index 1 out of range for attribute 'offset' of 1 element(s)");
  test::writeBytes(path, build({.channel = 2}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path),
                       "instruction 0: channel 2 on an instruction that is not a send or receive");
}

TEST(Artifact, HostKernelsWriteHostMemoryBesideTheArena) {
  // ZeRO-Offload's host memory: numbered after the arena, allocated beside
  // it, written by host kernels; the arena's high-water mark leaves it out.
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({.bufferOffset = 1024, .host = 256, .outputHost = true,
                                .onHost = true}));
  Artifact a = loadArtifact(path);
  EXPECT_EQ(a.memory.hostBytes, 256u);
  ASSERT_TRUE(a.program("train_step")->buffers[0].host);
  ASSERT_TRUE(a.program("train_step")->instructions[0].onHost);
  auto device = makeCpuDevice(a.memory.arenaBytes, a.memory.hostBytes, 0);
  auto comm = makeSingleRankCommunicator();
  BoundProgram p(*a.program("train_step"), *device, *comm, 0);
  p.run(StepContext{1});
  TensorView out = p.view("out");
  EXPECT_EQ(static_cast<uint8_t *>(out.data), device->hostArena().base() + 1024);
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.as<float>()[i], 2.5f);
  EXPECT_EQ(device->highWaterMark(), 0u);
}

TEST(Artifact, MemorySpacesAreChecked) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({.host = 256, .outputHost = true, .onHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "buffer 0 ('out'): a host buffer at offset 0 lies in "
                                           "the device arena of 1024 bytes");
  test::writeBytes(path, build({.bufferOffset = 1216, .host = 256, .outputHost = true,
                                .onHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "buffer 0 ('out') in host memory: bytes [1216, 1344) "
                                           "lie outside the arena of 1280 bytes");
  test::writeBytes(path, build({.onHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "instruction 0: output buffer 0 is in device memory; "
                                           "this instruction writes host memory");
  test::writeBytes(path, build({.bufferOffset = 1024, .host = 256, .outputHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "instruction 0: output buffer 0 is in host memory; "
                                           "this instruction writes device memory");
  test::writeBytes(path, build({.kernel = "copy_to_host", .bufferOffset = 1024, .host = 256,
                                .outputHost = true, .onHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "'copy_to_host' runs on the device, not the host");
  // A collective may run on the host (a layer run there under tp), on host
  // memory only; a transfer may not.
  test::writeBytes(path, build({.onHost = true, .kind = fb::OpKind::AllReduce}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "instruction 0: output buffer 0 is in device memory; "
                                           "this instruction writes host memory");
  test::writeBytes(path, build({.bufferOffset = 1024,
                                .host = 256,
                                .outputHost = true,
                                .onHost = true,
                                .kind = fb::OpKind::Send}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "only a kernel or a collective can run on the host");
  // The parts of host memory the plan names must fit in it.
  test::writeBytes(path, build({.bufferOffset = 1024,
                                .host = 256,
                                .hostOptimizerState = 192,
                                .hostActivations = 128,
                                .outputHost = true,
                                .onHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path),
                       "memory plan: host_optimizer_state_bytes 192, host_activations_bytes 128, "
                       "host_weights_bytes 0 and host_bytes 256 do not fit beside the arena of "
                       "1024 bytes");
  test::writeBytes(path, build({.bufferOffset = 1024,
                                .host = 256,
                                .hostActivations = 128,
                                .hostWeights = 192,
                                .outputHost = true,
                                .onHost = true}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "host_weights_bytes 192 and host_bytes 256 do not fit");
}

TEST(Artifact, OlderMinorVersionsLoad) {
  // Schema 1.6 had no transfer channels: every field it lacks reads as
  // its default (channel 0, the collectives' communicator).
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({.version = 106}));
  Artifact old = loadArtifact(path);
  EXPECT_EQ(old.schemaVersion, 106u);
  EXPECT_EQ(old.program("train_step")->instructions.at(0).channel, 0);
}

TEST(Artifact, FaultSiteIsTheMarkedInstruction) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  auto device = makeCpuDevice(1024);
  auto comm = makeSingleRankCommunicator();
  test::writeBytes(path, build({}));
  Artifact plain = loadArtifact(path);
  BoundProgram unmarked(*plain.program("train_step"), *device, *comm, 0);
  EXPECT_RUNTIME_ERROR(unmarked.poisonNextRun(),
                       "no instruction is marked as the fault-injection site");

  test::writeBytes(path, build({.faultSite = true}));
  Artifact marked = loadArtifact(path);
  BoundProgram p(*marked.program("train_step"), *device, *comm, 0);
  p.poisonNextRun();
  p.run(StepContext{1});
  TensorView out = p.view("out");
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_TRUE(std::isnan(out.as<float>()[i]));
  p.run(StepContext{2}); // only the next run is poisoned
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.as<float>()[i], 2.5f);

  test::writeBytes(path, build({.faultSite = true, .outputDType = fb::DType::I32}));
  EXPECT_RUNTIME_ERROR(loadArtifact(path), "instruction 0: the fault-injection site writes a "
                                           "i32 buffer; it must be f32, bf16 or f16");
}

TEST(Artifact, RankOffsetsAreReadWithTheirTerms) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({.rankOffsetAttr = "offset"}));
  Artifact a = loadArtifact(path);
  const InstructionInfo &inst = a.program("train_step")->instructions[0];
  ASSERT_EQ(inst.rankOffsets.size(), 1u);
  EXPECT_EQ(inst.rankOffsets[0].attr, "offset");
  EXPECT_EQ(inst.rankOffsets[0].axes, std::vector<std::string>{"tp"});
  EXPECT_EQ(inst.rankOffsets[0].stride, 16);
}

TEST(Artifact, BindingErrorsNameInstructionKernelAndLocation) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({.kernel = "frobnicate"}));
  Artifact a = loadArtifact(path);
  auto device = makeCpuDevice(a.memory.arenaBytes);
  auto comm = makeSingleRankCommunicator();
  EXPECT_RUNTIME_ERROR(BoundProgram(*a.program("train_step"), *device, *comm, 3),
                       "rank 3, program 'train_step', instruction 0 (kernel 'frobnicate' at "
                       "model.mlir:3:5): the cpu backend has no kernel named 'frobnicate'");
  test::writeBytes(path, build({.kernel = "gelu"}));
  a = loadArtifact(path);
  EXPECT_RUNTIME_ERROR(BoundProgram(*a.program("train_step"), *device, *comm, 0),
                       "instruction 0 (kernel 'gelu' at model.mlir:3:5): ");
}

TEST(Init, ValuesDependOnlyOnSeedNameAndIndex) {
  EXPECT_EQ(initNormal(1, "w", 17), initNormal(1, "w", 17));
  EXPECT_NE(initNormal(1, "w", 17), initNormal(2, "w", 17));
  EXPECT_NE(initNormal(1, "w", 17), initNormal(1, "v", 17));
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = initNormal(5, "stats", i);
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n), 1.0, 0.01);
  for (int i = 0; i < 1000; ++i) {
    double u = initUniform(5, "u", i);
    EXPECT_GE(u, -1.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(Init, InitializesParametersAndZeroesState) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({}));
  Artifact a = loadArtifact(path);
  Arena arena(a.memory.arenaBytes);
  std::memset(arena.base(), 0xff, arena.size());
  initializeParameters(a, arena, 3);
  const float *w = reinterpret_cast<const float *>(arena.base() + 512);
  for (int i = 0; i < 16; ++i)
    EXPECT_FLOAT_EQ(w[i], static_cast<float>(0.5 * initNormal(3, "w", i)));
}

TEST(Init, LeavesUnwantedParametersAsTheyAre) {
  test::TempDir dir;
  std::string path = dir.file("a.llmc");
  test::writeBytes(path, build({}));
  Artifact a = loadArtifact(path);
  a.memory.persistentBytes = a.memory.arenaBytes; // all of it persistent
  Arena arena(a.memory.arenaBytes);
  std::memset(arena.base(), 0xff, arena.size());
  initializeParameters(a, arena, 3, 0, [](const std::string &) { return false; });
  // "w" (16 floats at 512) is the caller's to set; the rest of the
  // persistent state is zeroed.
  EXPECT_EQ(arena.base()[512], 0xff);
  EXPECT_EQ(arena.base()[512 + 63], 0xff);
  EXPECT_EQ(arena.base()[511], 0);
  EXPECT_EQ(arena.base()[512 + 64], 0);
  EXPECT_EQ(arena.base()[a.memory.arenaBytes - 1], 0);
}
