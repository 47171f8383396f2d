# -Wall -Wextra -Wshadow everywhere (host code); -Werror when DSV4_WERROR (CI).
add_library(dsv4_warnings INTERFACE)
target_compile_options(dsv4_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${DSV4_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
