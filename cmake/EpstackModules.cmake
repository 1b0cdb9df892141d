# C++20 modules `epstack` and `epstack.dnnl` (modules/*.cppm) with clang. Debian 12's CMake 3.25 can scan module
# dependencies only for MSVC and a patched GCC (its experimental CMAKE_EXPERIMENTAL_CXX_MODULE_CMAKE_API learns
# clang's P1689 scanner in 3.26), so clang's two steps run as custom commands: `--precompile` makes the module's BMI
# (.pcm), and compiling the .pcm makes its object (the module initializer). A target that links epstack::module
# (or epstack::module_dnnl) gets `-fmodule-file=<name>=<pcm>` and both objects; the BMI is built with the flags the
# importing targets use (standard, build type, sanitizers), which clang requires to match.
include(${CMAKE_CURRENT_LIST_DIR}/epstackModuleTools.cmake)

epstack_add_module(epstack module ${PROJECT_SOURCE_DIR}/modules/epstack.cppm epstack::epstack)
if(TARGET epstack::dnnl)
  epstack_add_module(epstack.dnnl module_dnnl ${PROJECT_SOURCE_DIR}/modules/epstack.dnnl.cppm epstack::dnnl)
endif()

# In-tree, the module consumer is a test (CI builds it with clang-19; test/consumer/modules is the same program as a
# project of its own).
if(EPSTACK_BUILD_TESTS AND EPSTACK_MASTER_PROJECT)
  add_executable(epstack_module_consumer ${PROJECT_SOURCE_DIR}/test/consumer/modules/main.cpp)
  target_link_libraries(epstack_module_consumer PRIVATE epstack::module)
  if(TARGET epstack::module_dnnl)
    target_link_libraries(epstack_module_consumer PRIVATE epstack::module_dnnl)
  endif()
  epstack_target_defaults(epstack_module_consumer)
  # ccache does not hash the BMI an importer reads, so it would hand back an object compiled against an older module
  # (a stale class layout: ASan found one). Importers compile without it.
  set_target_properties(epstack_module_consumer PROPERTIES CXX_COMPILER_LAUNCHER "")
  add_test(NAME module_consumer COMMAND epstack_module_consumer)
  set_tests_properties(module_consumer PROPERTIES LABELS unit)
endif()
