# CUDA: sm_90a by default, because wgmma and TMA exist only on the arch-specific target.
# The runtime is linked statically so binaries need no CUDA libraries on the GPU machine.
# CMake 3.25 does not know nvcc 13's C++20 flag, so the standard is passed by hand.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90a)
endif()
set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -std=c++20 --expt-relaxed-constexpr")
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
enable_language(CUDA)
# Targets that link C++20 libraries ask for the CUDA20 dialect, whose flag CMake 3.25 lacks.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
find_package(CUDAToolkit REQUIRED)
