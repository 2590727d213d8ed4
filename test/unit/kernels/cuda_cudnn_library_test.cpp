//===- cuda_cudnn_library_test.cpp - finding, checking and refusing cuDNN -===//
//
// The loader of kernels/cuda/CudnnLibrary.h without a GPU: stand-in
// libraries (Inputs/fake_cudnn.cpp) that report chosen versions are
// accepted or refused against headers 9.19.0 and CUDA 13, through
// LLMC_CUDNN (a file or a directory) and the directory search, with the
// reason a user reads; absent paths and files that are not libraries say
// so. The toolkit's real libcudnn.so.9, where the build found one, is
// accepted against this build's headers, and cudnn-frontend, compiled to
// load cuDNN at run time, reaches it through the handle the loader set (on
// a machine without a GPU, as far as cudnnCreate's refusal). And the
// summary lines that say which attention each op got (AttentionChoice.h).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/CudnnLibrary.h"
#include "kernels/cuda/CudnnSdpa.h"
#include "kernels/cuda/Device.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace llmc::test {
namespace {

namespace fs = std::filesystem;
using cuda::CudnnLoad;
using cuda::CudnnSearch;

constexpr int64_t kHeaders = 91900; // what the tests pretend the build was compiled against
constexpr int kCuda = 13;

/// The stand-ins' directory: lib/fake-cudnn beside bin/kernel_tests (a
/// build carried to another machine), else where this build put them.
const std::string &fakeDir() {
  static const std::string dir = [] {
    std::error_code error;
    fs::path beside = fs::read_symlink("/proc/self/exe", error).parent_path() / "../lib/fake-cudnn";
    return !error && fs::is_directory(beside) ? fs::canonical(beside).string()
                                               : std::string(LLMC_FAKE_CUDNN_DIR);
  }();
  return dir;
}

std::string fake(const std::string &name) { return fakeDir() + "/libfake_cudnn_" + name + ".so"; }

/// The stand-ins are built with kernel_tests; a copy of the tests without
/// them cannot check the loader against them.
#define LLMC_REQUIRE_FAKES()                                                                      \
  if (!fs::is_directory(fakeDir())) GTEST_SKIP() << "no stand-in libraries in " << fakeDir()

CudnnLoad loadFile(const std::string &path) {
  CudnnSearch search;
  search.override = path;
  search.loaderPath = false;
  return cuda::loadCudnn(search, kHeaders, kCuda);
}

/// A fresh directory under the test's temporary directory.
fs::path tempDir(const std::string &name) {
  fs::path dir = fs::temp_directory_path() /
                 ("llmc-cudnn-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// `dir`/libcudnn.so.9, a link to the stand-in `name`.
void installAs(const fs::path &dir, const std::string &name) {
  fs::create_symlink(fake(name), dir / "libcudnn.so.9");
}

TEST(CudnnLibrary, VersionText) {
  EXPECT_EQ(cuda::cudnnVersionText(91900), "9.19.0");
  EXPECT_EQ(cuda::cudnnVersionText(90102), "9.1.2");
  EXPECT_EQ(cuda::cudnnVersionText(100000), "10.0.0");
  EXPECT_EQ(cuda::cudnnVersionText(8906), "8.9.6"); // cuDNN 8's encoding
}

TEST(CudnnLibrary, RuntimeMustBeSameMajorAndNoOlderMinor) {
  EXPECT_EQ(cuda::cudnnVersionRefusal(91900, 13000, kHeaders, kCuda), "");
  EXPECT_EQ(cuda::cudnnVersionRefusal(92305, 13020, kHeaders, kCuda), "");
  EXPECT_EQ(cuda::cudnnVersionRefusal(91100, 13000, kHeaders, kCuda),
            "cuDNN 9.11.0 cannot serve code built against the 9.19.0 headers (it needs major 9, "
            "minor 19 or later)");
  EXPECT_EQ(cuda::cudnnVersionRefusal(100000, 13000, kHeaders, kCuda),
            "cuDNN 10.0.0 cannot serve code built against the 9.19.0 headers (it needs major 9, "
            "minor 19 or later)");
  EXPECT_EQ(cuda::cudnnVersionRefusal(8906, 12000, kHeaders, kCuda),
            "cuDNN 8.9.6 cannot serve code built against the 9.19.0 headers (it needs major 9, "
            "minor 19 or later)");
  EXPECT_EQ(cuda::cudnnVersionRefusal(91900, 12080, kHeaders, kCuda),
            "cuDNN 9.19.0 is built for CUDA 12.8, this build of llmc for CUDA 13");
  EXPECT_EQ(cuda::cudnnVersionRefusal(91900, 13000, 0, kCuda),
            "this build of llmc was compiled without cuDNN's headers");
}

TEST(CudnnLibrary, AcceptsTheSameOrALaterMinor) {
  LLMC_REQUIRE_FAKES();
  for (const char *name : {"same", "newer"}) {
    CudnnLoad load = loadFile(fake(name));
    ASSERT_NE(load.handle, nullptr) << name << ": " << load.why;
    EXPECT_EQ(load.path, fake(name));
    EXPECT_EQ(load.why, "");
    EXPECT_EQ(load.version, std::string(name) == "same" ? 91900 : 92300);
    dlclose(load.handle);
  }
}

TEST(CudnnLibrary, RefusesOlderOtherMajorOrOtherCuda) {
  LLMC_REQUIRE_FAKES();
  struct Refusal {
    const char *name, *why;
  };
  for (const Refusal &r :
       {Refusal{"older", "cuDNN 9.11.0 cannot serve code built against the 9.19.0 headers"},
        Refusal{"next_major", "cuDNN 10.0.0 cannot serve code built against the 9.19.0 headers"},
        Refusal{"cuda12", "cuDNN 9.19.0 is built for CUDA 12.8, this build of llmc for CUDA 13"},
        Refusal{"not_cudnn",
                "has no cudnnGetVersion/cudnnGetCudartVersion: not a cuDNN library"}}) {
    CudnnLoad load = loadFile(fake(r.name));
    EXPECT_EQ(load.handle, nullptr) << r.name;
    EXPECT_EQ(load.why.rfind(fake(r.name) + ": " + r.why, 0), 0u) << load.why;
  }
}

TEST(CudnnLibrary, OverrideThatIsMissingOrNotALibrary) {
  CudnnLoad missing = loadFile("/nonexistent/libcudnn.so.9");
  EXPECT_EQ(missing.handle, nullptr);
  EXPECT_EQ(missing.why, "LLMC_CUDNN names /nonexistent/libcudnn.so.9, which does not exist");

  fs::path dir = tempDir("text");
  std::ofstream(dir / "libcudnn.so.9") << "not an ELF file\n";
  CudnnLoad text = loadFile((dir / "libcudnn.so.9").string());
  EXPECT_EQ(text.handle, nullptr);
  EXPECT_NE(text.why.find((dir / "libcudnn.so.9").string() + ": "), std::string::npos) << text.why;
  // A directory without the library: the file it would hold is named.
  CudnnLoad empty = loadFile(tempDir("empty").string());
  EXPECT_NE(empty.why.find("/libcudnn.so.9, which does not exist"), std::string::npos)
      << empty.why;
  fs::remove_all(dir);
}

TEST(CudnnLibrary, OverrideDirectoryHoldsTheLibrary) {
  LLMC_REQUIRE_FAKES();
  fs::path dir = tempDir("dir");
  installAs(dir, "same");
  CudnnLoad load = loadFile(dir.string());
  ASSERT_NE(load.handle, nullptr) << load.why;
  EXPECT_EQ(load.path, (dir / "libcudnn.so.9").string());
  dlclose(load.handle);
  fs::remove_all(dir);
}

TEST(CudnnLibrary, SearchSkipsRefusedLibrariesAndReportsEach) {
  LLMC_REQUIRE_FAKES();
  fs::path old = tempDir("old"), good = tempDir("good"), none = tempDir("none");
  installAs(old, "older");
  installAs(good, "newer");
  CudnnSearch search;
  search.directories = {none.string(), old.string(), good.string()};
  search.loaderPath = false;
  CudnnLoad load = cuda::loadCudnn(search, kHeaders, kCuda);
  ASSERT_NE(load.handle, nullptr) << load.why;
  EXPECT_EQ(load.path, (good / "libcudnn.so.9").string());
  dlclose(load.handle);

  search.directories = {old.string()};
  load = cuda::loadCudnn(search, kHeaders, kCuda);
  EXPECT_EQ(load.handle, nullptr);
  EXPECT_EQ(load.why, (old / "libcudnn.so.9").string() +
                          ": cuDNN 9.11.0 cannot serve code built against the 9.19.0 headers "
                          "(it needs major 9, minor 19 or later)");

  search.directories = {none.string()};
  load = cuda::loadCudnn(search, kHeaders, kCuda);
  EXPECT_EQ(load.handle, nullptr);
  EXPECT_EQ(load.why, "libcudnn.so.9 not found (looked in the CUDA toolkit, PyTorch's cuDNN "
                      "wheel and the loader path; LLMC_CUDNN may name it)");
  for (const fs::path &dir : {old, good, none}) fs::remove_all(dir);
}

TEST(CudnnLibrary, DefaultSearchHonoursLlmcCudnn) {
  const char *before = std::getenv("LLMC_CUDNN");
  std::string saved = before ? before : "";
  setenv("LLMC_CUDNN", "/opt/my/cudnn", 1);
  CudnnSearch search = cuda::defaultCudnnSearch();
  EXPECT_EQ(search.override, "/opt/my/cudnn");
  EXPECT_TRUE(search.directories.empty());
  EXPECT_FALSE(search.loaderPath);
  if (before) setenv("LLMC_CUDNN", saved.c_str(), 1);
  else unsetenv("LLMC_CUDNN");
  if (!before) {
    search = cuda::defaultCudnnSearch();
    EXPECT_TRUE(search.override.empty());
    EXPECT_TRUE(search.loaderPath);
    EXPECT_FALSE(search.directories.empty()); // at least the toolkit's
  }
}

/// The toolkit's own cuDNN (9.19 here, the headers' version) passes the
/// checks: what a GPU machine with this toolkit loads. The graph API's
/// sub-libraries are opened from its directory, so cuDNN's own open of one
/// by soname gets that copy, whatever LD_LIBRARY_PATH says.
TEST(CudnnLibrary, ToolkitLibraryIsAccepted) {
  if (cuda::cudnnHeaderVersion() == 0) GTEST_SKIP() << "built without cuDNN headers";
  CudnnSearch search = cuda::defaultCudnnSearch();
  search.override.clear();
  search.loaderPath = false;
  bool found = false;
  for (const std::string &dir : search.directories)
    found = found || fs::exists(dir + "/libcudnn.so.9");
  if (!found) GTEST_SKIP() << "no libcudnn.so.9 in the CUDA toolkit or a Python install here";
  CudnnLoad load = cuda::loadCudnn(search, cuda::cudnnHeaderVersion(), kCuda);
  ASSERT_NE(load.handle, nullptr) << load.why;
  EXPECT_GE(load.version, cuda::cudnnHeaderVersion());
  const fs::path dir = fs::canonical(fs::path(load.path).parent_path());
  ASSERT_FALSE(load.companions.empty()) << "nothing opened beside " << load.path;
  for (const std::string &companion : load.companions)
    EXPECT_EQ(fs::canonical(fs::path(companion).parent_path()), dir) << companion;
  void *graph = dlopen("libcudnn_graph.so.9", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(graph, nullptr) << "libcudnn_graph.so.9 is not loaded";
  link_map *map = nullptr;
  ASSERT_EQ(dlinfo(graph, RTLD_DI_LINKMAP, &map), 0);
  EXPECT_EQ(fs::canonical(fs::path(map->l_name).parent_path()), dir) << map->l_name;
  dlclose(graph);
}

/// Without a GPU, the cuDNN path goes as far as it can: the process's
/// cuDNN loads, cudnn-frontend calls cudnnCreate through the loader's
/// handle, and cuDNN's refusal comes back as the reason, not a crash.
TEST(CudnnLibrary, FrontendReachesCudnnThroughTheHandle) {
  std::string noGpu;
  if (cuda::deviceCount(&noGpu) > 0)
    GTEST_SKIP() << "a GPU is present: CudaAttentionCudnn.* test the path";
  const cuda::CudnnLoad &cudnn = cuda::processCudnn();
  if (!cudnn.handle) GTEST_SKIP() << "cuDNN is not loaded here: " << cudnn.why;
  cuda::CudnnSdpaShape shape;
  shape.b = 1, shape.t = shape.s = 64, shape.h = shape.kv = 2, shape.d = 64;
  shape.queryRow = shape.keyRow = 128;
  cuda::CudnnSdpaOperands operands; // null pointers: nothing is read before the plan
  std::string why;
  EXPECT_EQ(cuda::bindCudnnSdpa(shape, operands, why), nullptr);
#if LLMC_TEST_CUDNN_FRONTEND
  EXPECT_EQ(why.rfind("cudnnCreate failed: ", 0), 0u) << why;
#else
  EXPECT_EQ(why.rfind("this build has no cudnn-frontend headers", 0), 0u) << why;
#endif
}

TEST(AttentionChoice, NotesGroupOpsByImplementationAndReason) {
  cuda::takeAttentionNotes(); // whatever earlier tests bound
  for (int layer = 0; layer < 12; ++layer) {
    cuda::noteAttention("attention_packed", "cudnn", "");
    cuda::noteAttention("attention_packed_grad", "cudnn", "");
  }
  const std::string f32 = "cuDNN: f32 (cuDNN's fused attention takes bf16 and f16)";
  cuda::noteAttention("attention", "cuda-cores", f32);
  cuda::noteAttention("attention_grad", "cuda-cores", f32);
  cuda::noteAttention("attention_grad", "cuda-cores", "cuDNN: cuDNN is not loaded: x");
  std::vector<std::string> lines = cuda::takeAttentionNotes();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "attention: cudnn for 12 attention_packed, 12 attention_packed_grad");
  EXPECT_EQ(lines[1], "attention: cuda-cores for 1 attention, 1 attention_grad (cuDNN: f32 "
                      "(cuDNN's fused attention takes bf16 and f16))");
  EXPECT_EQ(lines[2], "attention: cuda-cores for 1 attention_grad (cuDNN: cuDNN is not loaded: x)");
  EXPECT_TRUE(cuda::takeAttentionNotes().empty());
}

} // namespace
} // namespace llmc::test
