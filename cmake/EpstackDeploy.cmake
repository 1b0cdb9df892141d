# Deployables: programs that run a deployment model (`epstack compile --format deploy`) with the CPU kernels the
# model needs and nothing else, linking neither protobuf nor onnx. Included by epstack's own build and installed with
# its package (epstackConfig.cmake includes it).
#
# epstack_kernels_header(OUTPUT header MODEL model.deploy [NAMESPACE ns] [TOOL epstack] [DEPENDS ...])
#   A build step that runs `epstack ops MODEL -o OUTPUT`: the header with the typelist of the kernels the model needs
#   (`ns::kernels`, and `ns::cpu_provider` over them). The step runs again when the model changes.
#
# epstack_deployable(TARGET [BUDGET bytes])
#   Compiles TARGET's own code for size (-Os and a section per function, except in Debug builds) and links it so that
#   unused code and libraries stay out (--gc-sections, --as-needed; a linker map beside it;
#   scripts/deploy_sizes.sh TARGET tells what each part costs) and checks, after every link,
#   that it depends on neither protobuf nor onnx: the build fails when the program needs libprotobuf or libonnx*
#   (its dynamic section) or holds their symbols (a static link). With BUDGET, the test `<TARGET>_size` checks its
#   stripped size against it and that `ldd` shows neither library. When epstack was built with EPSTACK_DEPLOY_LTO (g++,
#   the default there) and TARGET is compiled by the same g++, TARGET is compiled and linked with -flto: one program.

set(EPSTACK_DEPLOY_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(epstack_kernels_header)
  cmake_parse_arguments(ARG "" "OUTPUT;MODEL;NAMESPACE;TOOL" "DEPENDS" ${ARGN})
  if(NOT ARG_OUTPUT OR NOT ARG_MODEL)
    message(FATAL_ERROR "epstack_kernels_header: OUTPUT and MODEL are required")
  endif()
  if(NOT ARG_TOOL)
    if(TARGET epstack_cli)
      set(ARG_TOOL $<TARGET_FILE:epstack_cli>)
      list(APPEND ARG_DEPENDS epstack_cli)
    else()
      find_program(EPSTACK_TOOL epstack REQUIRED)
      set(ARG_TOOL ${EPSTACK_TOOL})
    endif()
  endif()
  set(ns_args)
  if(ARG_NAMESPACE)
    set(ns_args --namespace ${ARG_NAMESPACE})
  endif()
  add_custom_command(OUTPUT ${ARG_OUTPUT}
                     COMMAND ${ARG_TOOL} ops ${ARG_MODEL} -o ${ARG_OUTPUT} ${ns_args}
                     DEPENDS ${ARG_MODEL} ${ARG_DEPENDS}
                     COMMENT "epstack ops: the kernels of ${ARG_MODEL}"
                     VERBATIM)
endfunction()

function(epstack_deployable target)
  cmake_parse_arguments(ARG "" "BUDGET" "" ${ARGN})
  # The linker map beside the program: what the linker kept, and from which object (with LTO, one object for most).
  target_link_options(${target} PRIVATE -Wl,--gc-sections -Wl,--as-needed -Wl,-Map=$<TARGET_FILE:${target}>.map)
  # The program's own code (the session template, its inputs) runs once per session: optimised for size, one section
  # per function (a Debug build keeps its flags).
  target_compile_options(${target} PRIVATE -ffunction-sections -fdata-sections $<$<NOT:$<CONFIG:Debug>>:-Os>)
  # Linked as one program when epstack was built with EPSTACK_DEPLOY_LTO (fat LTO objects) by this very compiler.
  if(EPSTACK_DEPLOY_LTO AND EPSTACK_DEPLOY_LTO_COMPILER STREQUAL "${CMAKE_CXX_COMPILER_ID}-${CMAKE_CXX_COMPILER_VERSION}")
    set_property(TARGET ${target} PROPERTY EPSTACK_LTO ON)
    target_compile_options(${target} PRIVATE -flto=auto)
    # The kernels pass 64-byte vectors between functions of their own files, built without -Wpsabi's note (the CPU
    # provider's CMakeLists); the link compiles them again.
    target_link_options(${target} PRIVATE -flto=auto -Wno-psabi)
  endif()
  # Relative relocations packed (DT_RELR: binutils 2.38, glibc 2.36): a position-independent program's table of
  # pointers to fix at load shrinks to a bitmap.
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-Wl,-z,pack-relative-relocs" EPSTACK_LINKER_PACKS_RELOCS)
  if(EPSTACK_LINKER_PACKS_RELOCS)
    target_link_options(${target} PRIVATE -Wl,-z,pack-relative-relocs)
  endif()
  find_program(EPSTACK_READELF NAMES readelf)
  find_program(EPSTACK_NM NAMES nm)
  add_custom_command(TARGET ${target} POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:${target}> -DREADELF=${EPSTACK_READELF}
                             -DNM=${EPSTACK_NM} -P ${EPSTACK_DEPLOY_CMAKE_DIR}/epstack_check_deployable.cmake
                     COMMENT "epstack: ${target} links neither protobuf nor onnx"
                     VERBATIM)
  if(ARG_BUDGET)
    add_test(NAME ${target}_size
             COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:${target}> -DBUDGET=${ARG_BUDGET} -DSTRIP=${CMAKE_STRIP}
                     -DREADELF=${EPSTACK_READELF} -DNM=${EPSTACK_NM} -DSIZE_REPORT=ON
                     -P ${EPSTACK_DEPLOY_CMAKE_DIR}/epstack_check_deployable.cmake)
    set_tests_properties(${target}_size PROPERTIES LABELS "unit;deploy")
  endif()
endfunction()
