//===- HostDevice.h - code both backends compile --------------*- C++ -*-===//
//
// LLMC_HOST_DEVICE marks an inline function that the CPU kernels (g++) and
// the CUDA kernels (nvcc, host and device) share, so a formula that both
// backends must agree on exists once. Such functions use only arithmetic
// both compilers round the same way (see each use).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_HOSTDEVICE_H
#define LLMC_COMMON_HOSTDEVICE_H

#ifdef __CUDACC__
#define LLMC_HOST_DEVICE __host__ __device__
#else
#define LLMC_HOST_DEVICE
#endif

#endif
