//===- CudnnLibrary.h - libcudnn, found and loaded at run time --*- C++ -*-===//
//
// llmc has no link-time dependency on cuDNN: attention_cudnn.cpp is compiled
// with cudnn-frontend's dynamic loading, which calls cuDNN through
// `cudnn_frontend::cudnn_dlhandle`. This file finds a libcudnn.so.9, opens
// it and checks it before that handle is set: cuDNN promises that a runtime
// whose major version equals the headers' and whose minor is at least
// theirs serves code built against them, and a cuDNN built for another
// CUDA major than this build's cannot share its streams. A library that
// fails either check is refused, and attention runs on llmc's own kernels
// (one line says why). Plain C++ (dlopen): testable without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_CUDNNLIBRARY_H
#define LLMC_KERNELS_CUDA_CUDNNLIBRARY_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::cuda {

/// cuDNN's version as cudnnGetVersion() and CUDNN_VERSION encode it since
/// cuDNN 9 (major·10000 + minor·100 + patch), e.g. "9.19.0".
std::string cudnnVersionText(int64_t version);

/// Why a cuDNN runtime of version `runtime`, built for the CUDA runtime
/// `runtimeCudart` (major·1000 + minor·10, cudnnGetCudartVersion()), cannot
/// serve code built against cuDNN headers `headers` and a CUDA runtime of
/// major `cudaMajor`; "" when it can.
std::string cudnnVersionRefusal(int64_t runtime, int64_t runtimeCudart, int64_t headers,
                                int cudaMajor);

/// Where libcudnn.so.9 is looked for.
struct CudnnSearch {
  /// LLMC_CUDNN: a library file, or a directory holding libcudnn.so.9. When
  /// set it is the only place looked at.
  std::string override;
  /// Directories tried in order for libcudnn.so.9.
  std::vector<std::string> directories;
  /// Finally, libcudnn.so.9 through the dynamic loader's own path
  /// (LD_LIBRARY_PATH, the ld.so cache).
  bool loaderPath = true;
};

/// LLMC_CUDNN when set; else the CUDA toolkit's library directories (the
/// one this build used, $CUDA_HOME's, /usr/local/cuda's) and PyTorch's
/// cuDNN wheel (nvidia/cudnn/lib under the site-packages of the Python
/// installs on PATH, of $VIRTUAL_ENV and $CONDA_PREFIX, and of the usual
/// system prefixes), then the loader path.
CudnnSearch defaultCudnnSearch();

/// What loading gave.
struct CudnnLoad {
  void *handle = nullptr; ///< dlopen handle; null when absent or refused
  std::string path;       ///< the library kept
  int64_t version = 0;    ///< its cudnnGetVersion()
  std::string why;        ///< without a handle: why, in one line
  /// The graph API's sub-libraries opened from `path`'s directory (never
  /// closed), so cuDNN's own opens by soname find these and not another
  /// install's.
  std::vector<std::string> companions;
};

/// Tries the places of `search` in order and keeps the first library that
/// opens and passes cudnnVersionRefusal against `headerVersion` and
/// `cudaMajor`; the others are closed again. Without one, `why` names each
/// library refused and why, or says where none was found.
CudnnLoad loadCudnn(const CudnnSearch &search, int64_t headerVersion, int cudaMajor);

/// The cuDNN headers this build was compiled against (CUDNN_VERSION), 0
/// when it had none.
int64_t cudnnHeaderVersion();

/// The process's cuDNN: loaded on the first call with the default search
/// against this build's headers and CUDA runtime (then kept), and handed to
/// cudnn-frontend as its `cudnn_dlhandle`. Thread-safe.
const CudnnLoad &processCudnn();

} // namespace llmc::cuda

#endif
