// DSV4_CUDA_CHECK: every CUDA runtime call and every launch (cudaGetLastError) goes through it.
// A CUDA error is a bug in dsv4 (shapes were validated before the launch), so it aborts with
// file:line like DSV4_CHECK. Only .cu files include this (it needs the CUDA runtime header).
#pragma once

#include <cuda_runtime.h>

#include "base/check.h"

#define DSV4_CUDA_CHECK(expr)                                                          \
  do {                                                                                 \
    const cudaError_t dsv4_cuda_error_ = (expr);                                       \
    if (dsv4_cuda_error_ != cudaSuccess) {                                             \
      ::dsv4::base::check_failed(__FILE__, __LINE__, #expr,                            \
                                 cudaGetErrorString(dsv4_cuda_error_));                \
    }                                                                                  \
  } while (0)
