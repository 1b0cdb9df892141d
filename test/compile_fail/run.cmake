# Compiles SOURCE (which must fail) and checks that the compiler's output contains the text after
# "// expected-error: " on the source's first line. Invoked by ctest with -DCXX=... -DINCLUDES=... -DSOURCE=...
# The expected text must not contain a semicolon (CMake would split it into a list).
file(STRINGS "${SOURCE}" first LIMIT_COUNT 1)
string(REGEX REPLACE "^// expected-error: " "" expected "${first}")
separate_arguments(include_args UNIX_COMMAND "${INCLUDES}")
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${include_args} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
string(FIND "${out}${err}" "${expected}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed to compile without the expected message:\n  ${expected}\ncompiler output:\n${err}")
endif()
message(STATUS "failed to compile as expected: ${expected}")
