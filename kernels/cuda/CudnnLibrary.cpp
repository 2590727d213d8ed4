//===- CudnnLibrary.cpp - libcudnn, found and loaded at run time ----------===//
//
// Part of llmc: see CudnnLibrary.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudnnLibrary.h"

#include <cuda_runtime_api.h>
#if LLMC_HAVE_CUDNN_HEADERS
#include <cudnn_version.h>
#endif

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

// cudnn-frontend built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING calls every
// cuDNN function through this handle (cudnn_frontend_shim.h); it stays null
// until processCudnn() has accepted a library.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace llmc::cuda {
namespace {

constexpr const char *kLibrary = "libcudnn.so.9";

bool isDirectory(const std::string &path) {
  struct stat s;
  return stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

bool exists(const std::string &path) {
  struct stat s;
  return stat(path.c_str(), &s) == 0;
}

/// Every path matching the shell pattern, sorted.
std::vector<std::string> globPaths(const std::string &pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

std::string env(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

/// The directories of PyTorch's cuDNN wheel (nvidia-cudnn-cu13) under the
/// site-packages of `prefix` (a Python install's root).
void addWheelDirectories(const std::string &prefix, std::vector<std::string> &dirs) {
  for (const char *packages : {"site-packages", "dist-packages"})
    for (const std::string &dir :
         globPaths(prefix + "/lib/python3*/" + packages + "/nvidia/cudnn/lib"))
      dirs.push_back(dir);
}

/// The outcome of opening and checking one library file (or soname).
struct Attempt {
  void *handle = nullptr;
  int64_t version = 0;
  std::string why; ///< when refused
};

Attempt tryLibrary(const std::string &path, int64_t headerVersion, int cudaMajor) {
  Attempt a;
  dlerror();
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    a.why = error ? error : "dlopen failed";
    return a;
  }
  using VersionFn = size_t (*)();
  auto version = reinterpret_cast<VersionFn>(dlsym(handle, "cudnnGetVersion"));
  auto cudart = reinterpret_cast<VersionFn>(dlsym(handle, "cudnnGetCudartVersion"));
  if (!version || !cudart) {
    dlclose(handle);
    a.why = "has no cudnnGetVersion/cudnnGetCudartVersion: not a cuDNN library";
    return a;
  }
  a.version = static_cast<int64_t>(version());
  a.why = cudnnVersionRefusal(a.version, static_cast<int64_t>(cudart()), headerVersion, cudaMajor);
  if (!a.why.empty()) {
    dlclose(handle);
    return a;
  }
  a.handle = handle;
  return a;
}

/// libcudnn.so.9 only dispatches: it opens the graph API's libraries by
/// soname when first needed, and the loader would look in LD_LIBRARY_PATH
/// before the dispatcher's own directory — perhaps at another cuDNN's,
/// which cuDNN then refuses as a sub-library version mismatch. Opened here
/// first from the kept library's directory, those are what a later open by
/// soname finds. One that does not open (say, NVRTC missing for the
/// runtime-compiled engines) is left to cuDNN to open or report.
std::vector<std::string> openCompanions(const std::string &library) {
  std::vector<std::string> opened;
  const size_t slash = library.rfind('/');
  if (slash == std::string::npos)
    return opened; // found by soname: the loader's own choice
  for (const char *name :
       {"libcudnn_graph.so.9", "libcudnn_heuristic.so.9", "libcudnn_engines_precompiled.so.9",
        "libcudnn_engines_runtime_compiled.so.9"}) {
    const std::string path = library.substr(0, slash + 1) + name;
    if (exists(path) && dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL))
      opened.push_back(path);
  }
  return opened;
}

} // namespace

std::string cudnnVersionText(int64_t v) {
  // cuDNN 9 encodes major·10000 + minor·100 + patch; cuDNN 8 major·1000 + ….
  const int64_t major = v >= 10000 ? v / 10000 : v / 1000;
  const int64_t minor = v >= 10000 ? v % 10000 / 100 : v % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

std::string cudnnVersionRefusal(int64_t runtime, int64_t runtimeCudart, int64_t headers,
                                int cudaMajor) {
  if (headers <= 0) return "this build of llmc was compiled without cuDNN's headers";
  const auto major = [](int64_t v) { return v >= 10000 ? v / 10000 : v / 1000; };
  const auto minor = [](int64_t v) { return v >= 10000 ? v % 10000 / 100 : v % 1000 / 100; };
  if (major(runtime) != major(headers) || minor(runtime) < minor(headers))
    return "cuDNN " + cudnnVersionText(runtime) + " cannot serve code built against the " +
           cudnnVersionText(headers) + " headers (it needs major " +
           std::to_string(major(headers)) + ", minor " + std::to_string(minor(headers)) +
           " or later)";
  if (runtimeCudart / 1000 != cudaMajor)
    return "cuDNN " + cudnnVersionText(runtime) + " is built for CUDA " +
           std::to_string(runtimeCudart / 1000) + "." + std::to_string(runtimeCudart % 1000 / 10) +
           ", this build of llmc for CUDA " + std::to_string(cudaMajor);
  return "";
}

CudnnSearch defaultCudnnSearch() {
  CudnnSearch s;
  s.override = env("LLMC_CUDNN");
  if (!s.override.empty()) {
    s.loaderPath = false;
    return s;
  }
  std::vector<std::string> dirs;
#ifdef LLMC_CUDA_LIBRARY_DIR
  dirs.push_back(LLMC_CUDA_LIBRARY_DIR);
#endif
  for (const std::string &root :
       {env("CUDA_HOME"), env("CUDA_PATH"), std::string("/usr/local/cuda")})
    if (!root.empty())
      for (const char *lib : {"/lib64", "/lib"}) dirs.push_back(root + lib);
  // Python installs: each python3 on PATH (venvs, conda, pyenv), the active
  // virtual environment or conda prefix, then the system's.
  std::string path = env("PATH");
  for (size_t begin = 0; begin <= path.size();) {
    size_t end = std::min(path.find(':', begin), path.size());
    std::string dir = path.substr(begin, end - begin);
    if (!dir.empty() && exists(dir + "/python3")) addWheelDirectories(dir + "/..", dirs);
    begin = end + 1;
  }
  for (const std::string &prefix :
       {env("VIRTUAL_ENV"), env("CONDA_PREFIX"), env("HOME") + "/.local", std::string("/usr/local"),
        std::string("/usr"), std::string("/opt/conda")})
    if (!prefix.empty()) addWheelDirectories(prefix, dirs);
  // Each directory once, in first-seen order.
  std::set<std::string> seen;
  for (const std::string &dir : dirs)
    if (seen.insert(dir).second) s.directories.push_back(dir);
  return s;
}

CudnnLoad loadCudnn(const CudnnSearch &search, int64_t headerVersion, int cudaMajor) {
  CudnnLoad load;
  std::vector<std::string> candidates;
  if (!search.override.empty()) {
    const std::string file =
        isDirectory(search.override) ? search.override + "/" + kLibrary : search.override;
    if (!exists(file)) {
      load.why = "LLMC_CUDNN names " + file + ", which does not exist";
      return load;
    }
    candidates.push_back(file);
  }
  for (const std::string &dir : search.directories)
    if (exists(dir + "/" + kLibrary)) candidates.push_back(dir + "/" + kLibrary);
  if (search.loaderPath) candidates.push_back(kLibrary);

  std::vector<std::string> refusals;
  for (const std::string &candidate : candidates) {
    Attempt a = tryLibrary(candidate, headerVersion, cudaMajor);
    if (a.handle) {
      load.handle = a.handle;
      load.path = candidate;
      load.version = a.version;
      load.companions = openCompanions(candidate);
      return load;
    }
    // The loader path not knowing the soname is the end of a fruitless
    // search, not a refusal.
    if (candidate != kLibrary || a.version != 0) refusals.push_back(candidate + ": " + a.why);
  }
  std::ostringstream why;
  if (refusals.empty())
    why << kLibrary << " not found (looked in the CUDA toolkit, PyTorch's cuDNN wheel and the "
        << "loader path; LLMC_CUDNN may name it)";
  for (size_t i = 0; i < refusals.size(); ++i) why << (i ? "; " : "") << refusals[i];
  load.why = why.str();
  return load;
}

int64_t cudnnHeaderVersion() {
#if LLMC_HAVE_CUDNN_HEADERS
  return CUDNN_VERSION;
#else
  return 0;
#endif
}

const CudnnLoad &processCudnn() {
  static std::once_flag once;
  static CudnnLoad load;
  std::call_once(once, [] {
    load = loadCudnn(defaultCudnnSearch(), cudnnHeaderVersion(), CUDART_VERSION / 1000);
    cudnn_frontend::cudnn_dlhandle = load.handle;
    // cudnn-frontend opens a CUDA runtime of its own by soname, the first of
    // libcudart.so.12 and .13 it finds; pin it to the one llmc links (the
    // same library, already loaded), unless the user chose.
    const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), /*overwrite=*/0);
  });
  return load;
}

} // namespace llmc::cuda
