# -DDSV4_FUZZ=ON: libFuzzer targets under ASan + UBSan (tests/fuzz, run by scripts/fuzz.sh).
# Every library is instrumented for coverage (fuzzer-no-link) so the fuzzer sees inside the
# parsers; only the fuzz targets link the libFuzzer driver. Needs clang and a CPU-only build.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "DSV4_FUZZ needs clang (CC=clang CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
endif()
if(DSV4_CUDA)
  message(FATAL_ERROR "DSV4_FUZZ builds CPU code only: add -DDSV4_CUDA=OFF")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
