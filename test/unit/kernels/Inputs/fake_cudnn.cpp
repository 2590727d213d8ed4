//===- fake_cudnn.cpp - a stand-in for libcudnn.so.9 in the loader's tests ===//
//
// Reports the version FAKE_CUDNN_VERSION, built for the CUDA runtime
// FAKE_CUDNN_CUDART, through the two functions the loader checks; with
// FAKE_CUDNN_NO_SYMBOLS it has neither (a library that is not cuDNN).
//
//===----------------------------------------------------------------------===//

#include <cstddef>

#ifndef FAKE_CUDNN_NO_SYMBOLS
extern "C" size_t cudnnGetVersion() { return FAKE_CUDNN_VERSION; }
extern "C" size_t cudnnGetCudartVersion() { return FAKE_CUDNN_CUDART; }
#else
extern "C" int fakeCudnnPlaceholder() { return 0; }
#endif
