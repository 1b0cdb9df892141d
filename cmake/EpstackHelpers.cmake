# Warning flags, -Werror on request, and sanitizers: applied to every target epstack builds.
function(epstack_target_defaults target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
    # g++-12 at -O2/-O3 reports false -Wrestrict errors inside libstdc++ for `"literal" + std::string`
    # (GCC PR 105329, fixed in 13). Our headers avoid the pattern (detail::cat) so users do not need this.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-restrict)
    endif()
    if(EPSTACK_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
  if(EPSTACK_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${EPSTACK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${EPSTACK_SANITIZE})
  endif()
endfunction()

# -march=${EPSTACK_CPU_ARCH} for a target's own code (the CPU kernels, bench_peak). clang (19) turns -march=native on
# a CPU that reports AVX10.1 at 256 bits beside AVX-512 (seen on an Intel Xeon VM, 2026-11-30) into the warning
# "invalid feature combination: +avx10.1-256; will be promoted to avx10.1-512": a note about the host's feature list,
# not the code, which -Werror made an error in every file of the CPU provider. That warning is off for such targets.
function(epstack_target_arch target)
  if(NOT EPSTACK_CPU_ARCH)
    return()
  endif()
  target_compile_options(${target} PRIVATE -march=${EPSTACK_CPU_ARCH})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    include(CheckCXXCompilerFlag)
    check_cxx_compiler_flag(-Wno-invalid-feature-combination EPSTACK_HAS_WNO_INVALID_FEATURE_COMBINATION)
    if(EPSTACK_HAS_WNO_INVALID_FEATURE_COMBINATION)
      target_compile_options(${target} PRIVATE -Wno-invalid-feature-combination)
    endif()
  endif()
endfunction()
