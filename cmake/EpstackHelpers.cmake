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
