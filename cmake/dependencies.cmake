# Every dependency is a Debian package installed by scripts/setup.sh; nothing is fetched.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
# Boost.Beast and Boost.Asio (header-only) for the server's HTTP layer.
find_package(Boost 1.74 REQUIRED CONFIG)
# cpp-httplib: the server tests' HTTP client. Debian ships its implementation compiled, as
# libcpp-httplib.so.
find_path(DSV4_HTTPLIB_INCLUDE httplib.h REQUIRED)
find_library(DSV4_HTTPLIB_LIBRARY NAMES cpp-httplib REQUIRED)
# OpenBLAS for the CPU reference GEMMs. The static archive keeps the binaries self-contained, so
# they also run on the GPU machine, which has no OpenBLAS. Its OpenMP build (Debian's
# libopenblas-openmp-dev), so that BLAS and the kernels' own OpenMP loops share libgomp's one
# thread pool: with the pthread build the two pools spin against each other between calls
# (on 2 cores the tiny model's time to first token was 6-11x slower and erratic, `dsv4 bench`).
find_library(DSV4_OPENBLAS_STATIC NAMES libopenblas.a
             PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
find_path(DSV4_CBLAS_INCLUDE cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-openmp
          NO_DEFAULT_PATH)
if(NOT DSV4_OPENBLAS_STATIC OR NOT DSV4_CBLAS_INCLUDE)
  message(FATAL_ERROR "OpenBLAS's OpenMP build not found: install libopenblas-openmp-dev "
                      "(scripts/setup.sh does)")
endif()
add_library(dsv4_blas INTERFACE)
target_link_libraries(dsv4_blas INTERFACE ${DSV4_OPENBLAS_STATIC} OpenMP::OpenMP_CXX)
target_include_directories(dsv4_blas INTERFACE ${DSV4_CBLAS_INCLUDE})
if(DSV4_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()

# Binaries link libstdc++/libgcc statically so they run unchanged on the GPU machine.
set(DSV4_EXE_LINK_OPTIONS -static-libstdc++ -static-libgcc)
