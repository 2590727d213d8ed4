//===- ArgParserTest.cpp - the runtime tools' command lines ---------------===//

#include "runtime/support/ArgParser.h"
#include "runtime/CudaFlags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace llmc;

namespace {

/// Parses `words` (argv[0] added) with `args`; returns the error or "".
std::string parse(ArgParser &args, std::vector<std::string> words, std::string &positional) {
  words.insert(words.begin(), "tool");
  std::vector<char *> argv;
  for (std::string &w : words) argv.push_back(w.data());
  return args.parse(static_cast<int>(argv.size()), argv.data(), "artifact", positional);
}

} // namespace

TEST(ArgParser, ValuesFlagsAndThePositional) {
  int64_t steps = 0;
  double lr = 0;
  std::string name;
  std::vector<std::string> prompts;
  bool quiet = false, timing = true;
  ArgParser args;
  args.option("--steps", ArgParser::integer(steps));
  args.option("--lr", ArgParser::number(lr));
  args.option("--name", ArgParser::text(name));
  args.option("--prompt", ArgParser::append(prompts));
  args.flag("--quiet", quiet);
  args.flag("--no-timing", timing, false);
  std::string positional;
  EXPECT_EQ(parse(args,
                  {"--steps", "12", "m.llmc", "--lr=3e-4", "--name=a=b", "--prompt", "x",
                   "--prompt=y", "--quiet", "--no-timing"},
                  positional),
            "");
  EXPECT_EQ(steps, 12);
  EXPECT_DOUBLE_EQ(lr, 3e-4);
  EXPECT_EQ(name, "a=b"); // only the first '=' separates the value
  EXPECT_EQ(prompts, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(quiet);
  EXPECT_FALSE(timing);
  EXPECT_EQ(positional, "m.llmc");
  EXPECT_FALSE(args.helpRequested());
}

TEST(ArgParser, EachErrorNamesTheArgument) {
  int64_t steps = 0;
  ArgParser args;
  args.option("--steps", ArgParser::integer(steps));
  args.option("--mode", [](const std::string &v) { return v == "a" || v == "b"; }, "a or b");
  args.retired("--old", "--old is now --mode b");
  std::string p;
  EXPECT_EQ(parse(args, {"--steps"}, p), "option --steps needs a value");
  EXPECT_EQ(parse(args, {"--steps", "3x"}, p), "bad value '3x' for --steps");
  EXPECT_EQ(parse(args, {"--steps="}, p), "bad value '' for --steps");
  EXPECT_EQ(parse(args, {"--mode", "c"}, p), "bad value 'c' for --mode (expected a or b)");
  EXPECT_EQ(parse(args, {"--old"}, p), "--old is now --mode b");
  EXPECT_EQ(parse(args, {"--bogus"}, p), "unknown option '--bogus'");
  EXPECT_EQ(parse(args, {"-x"}, p), "unknown option '-x'");
  p.clear();
  EXPECT_EQ(parse(args, {"a.llmc", "b.llmc"}, p),
            "more than one artifact given ('a.llmc', 'b.llmc')");
}

TEST(ArgParser, HelpStopsReading) {
  int64_t steps = 0;
  ArgParser args;
  args.option("--steps", ArgParser::integer(steps));
  std::string p;
  EXPECT_EQ(parse(args, {"--help", "--bogus"}, p), "");
  EXPECT_TRUE(args.helpRequested());
}

TEST(ArgParser, IntegerListsNameTheBadItem) {
  std::vector<int64_t> values;
  std::string bad;
  EXPECT_TRUE(ArgParser::integerList("1, 2,3", values, bad));
  EXPECT_EQ(values, (std::vector<int64_t>{1, 2, 3}));
  values.clear();
  EXPECT_FALSE(ArgParser::integerList("1,x2,3", values, bad));
  EXPECT_EQ(bad, "x2");
  EXPECT_FALSE(ArgParser::integerList("1,,3", values, bad));
  EXPECT_EQ(bad, "");
}

TEST(CudaFlags, SetTheDeviceOptions) {
  CudaOptions cuda;
  ArgParser args;
  addCudaFlags(args, cuda);
  std::string p;
  EXPECT_EQ(
      parse(args,
            {"--tf32", "--no-gemm-timing", "--attention", "tensor-cores", "--device-comm=host"}, p),
      "");
  EXPECT_TRUE(cuda.tf32);
  EXPECT_FALSE(cuda.gemmTiming);
  EXPECT_EQ(cuda.attention, AttentionImpl::TensorCores);
  EXPECT_EQ(cuda.comm, DeviceComm::Host);
  EXPECT_EQ(parse(args, {"--attention", "fast"}, p),
            "bad value 'fast' for --attention (expected auto, cudnn, tensor-cores or cuda-cores)");
  EXPECT_EQ(parse(args, {"--device-comm", "mpi"}, p),
            "bad value 'mpi' for --device-comm (expected auto, nccl or host)");
  EXPECT_EQ(parse(args, {"--attention-tensor-cores"}, p),
            "--attention-tensor-cores is now --attention tensor-cores");
}
