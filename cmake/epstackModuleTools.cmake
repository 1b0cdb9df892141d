# The functions that build epstack's C++20 modules with clang (see EpstackModules.cmake for why custom commands):
# used in-tree, and installed beside epstackConfig.cmake so that a find_package user can build the modules too
# (`epstack_import_modules()`).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 16)
  message(FATAL_ERROR "epstack's C++20 modules need clang 16 or later (CI uses clang-19); this is "
                      "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
endif()

string(TOUPPER "${CMAKE_BUILD_TYPE}" EPSTACK_BUILD_TYPE_UPPER)
separate_arguments(EPSTACK_MODULE_FLAGS UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${EPSTACK_BUILD_TYPE_UPPER}}")
# The dialect CMake gives importing targets: gnu++20 unless CMAKE_CXX_EXTENSIONS is OFF (clang refuses a BMI built
# with the other one).
if(DEFINED CMAKE_CXX_EXTENSIONS AND NOT CMAKE_CXX_EXTENSIONS)
  list(APPEND EPSTACK_MODULE_FLAGS -std=c++20 -fPIC)
else()
  list(APPEND EPSTACK_MODULE_FLAGS -std=gnu++20 -fPIC)
endif()
if(EPSTACK_SANITIZE)
  list(APPEND EPSTACK_MODULE_FLAGS -fsanitize=${EPSTACK_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
endif()
set(EPSTACK_MODULE_DIR ${CMAKE_BINARY_DIR}/modules)
file(MAKE_DIRECTORY ${EPSTACK_MODULE_DIR})

# epstack_add_module(<module name> <target suffix> <interface unit> <library target> [imported module targets...])
function(epstack_add_module module suffix source library)
  set(pcm ${EPSTACK_MODULE_DIR}/${module}.pcm)
  set(obj ${EPSTACK_MODULE_DIR}/${module}.o)
  # The library's usage requirements (include folders, definitions), transitively, through a probe target.
  add_library(epstack_${suffix}_usage INTERFACE)
  target_link_libraries(epstack_${suffix}_usage INTERFACE ${library})
  set(inc "$<REMOVE_DUPLICATES:$<TARGET_PROPERTY:epstack_${suffix}_usage,INTERFACE_INCLUDE_DIRECTORIES>>")
  set(def "$<TARGET_PROPERTY:epstack_${suffix}_usage,INTERFACE_COMPILE_DEFINITIONS>")
  set(flags ${EPSTACK_MODULE_FLAGS} "$<$<BOOL:${inc}>:-I$<JOIN:${inc},$<SEMICOLON>-I>>" "$<$<BOOL:${def}>:-D$<JOIN:${def},$<SEMICOLON>-D>>")
  add_custom_command(OUTPUT ${pcm}
                     COMMAND ${CMAKE_CXX_COMPILER} ${flags} -MD -MF ${pcm}.d -x c++-module --precompile ${source} -o ${pcm}
                     DEPENDS ${source} DEPFILE ${pcm}.d
                     COMMAND_EXPAND_LISTS COMMENT "clang --precompile: module ${module}")
  add_custom_command(OUTPUT ${obj}
                     COMMAND ${CMAKE_CXX_COMPILER} ${EPSTACK_MODULE_FLAGS} -c ${pcm} -o ${obj}
                     DEPENDS ${pcm} COMMENT "clang: module ${module}'s object")
  add_custom_target(epstack_${suffix}_bmi DEPENDS ${pcm} ${obj})
  add_library(epstack_${suffix} INTERFACE)
  add_library(epstack::${suffix} ALIAS epstack_${suffix})
  add_dependencies(epstack_${suffix} epstack_${suffix}_bmi)
  # -fmodule-file-deps lists the BMI in the importer's depfile: an importer recompiles when the module changes. (Not
  # through ccache, which does not hash the BMI: give importing targets CXX_COMPILER_LAUNCHER "".)
  target_compile_options(epstack_${suffix} INTERFACE -fmodule-file=${module}=${pcm} -fmodule-file-deps)
  target_link_libraries(epstack_${suffix} INTERFACE ${obj} ${library})
endfunction()

