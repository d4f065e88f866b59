# `cmake --install build [--prefix P]` lays out era for other projects:
#   P/lib/libera_core.a                       the library (static: one file to ship with an app)
#   P/lib/era/libera_sentencepiece.so         the SentencePiece shim the library dlopens
#   P/include/era/*.h                         the public headers (include root: P/include);
#                                             they include nothing but each other and the
#                                             standard library (era/debug.h alone needs LibTorch)
#   P/lib/cmake/era/era-config.cmake          find_package(era CONFIG) -> imported target era::era
#   P/lib/pkgconfig/era.pc                    pkg-config --cflags --libs era
#   P/bin/era_infer, ...                      the command-line tools (installed where they are
#                                             defined, CMakeLists.txt); they find the shim in ../lib/era
include(CMakePackageConfigHelpers)

set(ERA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/era)

install(TARGETS era_core era_base EXPORT era-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS era_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/era)  # = ERA_SHIM_INSTALL_RELDIR

# Every header of src/era/ (the public face), and nothing else: tests/package compiles each one
# alone against the installed include folder.
file(GLOB ERA_PUBLIC_HEADERS ${CMAKE_CURRENT_SOURCE_DIR}/src/era/*.h)
install(FILES ${ERA_PUBLIC_HEADERS} ${CMAKE_BINARY_DIR}/generated/public/era/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/era)

install(EXPORT era-targets NAMESPACE era:: DESTINATION ${ERA_CMAKE_DIR})
set(ERA_SHIM_INSTALL_RELDIR ${CMAKE_INSTALL_LIBDIR}/era)
# era-config.cmake looks for the very LibTorch this build used (see the comment there).
get_filename_component(ERA_TORCH_PREFIX "${TORCH_INSTALL_PREFIX}" REALPATH)
configure_package_config_file(cmake/era-config.cmake.in ${CMAKE_BINARY_DIR}/package/era-config.cmake
  INSTALL_DESTINATION ${ERA_CMAKE_DIR} PATH_VARS ERA_SHIM_INSTALL_RELDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/era-config-version.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: a minor release may break the API
install(FILES ${CMAKE_BINARY_DIR}/package/era-config.cmake ${CMAKE_BINARY_DIR}/package/era-config-version.cmake
        DESTINATION ${ERA_CMAKE_DIR})

# ---- pkg-config ------------------------------------------------------------------------------
# LibTorch ships no .pc file, so its flags are written out from the LibTorch this build used
# (Debian: /usr/lib/x86_64-linux-gnu), and so are the four OpenCV modules the library links.
get_filename_component(ERA_TORCH_LIBDIR "${TORCH_LIBRARY}" DIRECTORY)
set(ERA_PC_TORCH_CFLAGS "${TORCH_CXX_FLAGS}")  # the ABI flag only: era's headers need no LibTorch
set(ERA_PC_TORCH_LIBS "${ERA_STDCXX_FIRST} -L${ERA_TORCH_LIBDIR}")
# A LibTorch outside the system folders (the PyPI route's wheel) must be found at run time too.
if(NOT ERA_TORCH_LIBDIR MATCHES "^/usr/lib")
  string(APPEND ERA_PC_TORCH_LIBS " -Wl,-rpath,${ERA_TORCH_LIBDIR}")
endif()
string(APPEND ERA_PC_TORCH_LIBS " -Wl,--no-as-needed -ltorch -ltorch_cpu")
if(TARGET torch_cuda)
  string(APPEND ERA_PC_TORCH_LIBS " -ltorch_cuda")
endif()
string(APPEND ERA_PC_TORCH_LIBS " -Wl,--as-needed -lc10")
if(ERA_TORCH_CUDA)  # util/device.cpp reads the CUDA caching allocator's counters
  string(APPEND ERA_PC_TORCH_LIBS " -lc10_cuda")
endif()
# era's own CUDA kernels (src/kernels/*.cu) call the CUDA runtime directly: the shared one this build
# linked (the toolkit's, found by LibTorch's CMake; the same soname LibTorch loads).
if(ERA_CUDA_SOURCES)
  if(TARGET CUDA::cudart)
    get_target_property(ERA_CUDART CUDA::cudart IMPORTED_LOCATION)
  endif()
  if(NOT ERA_CUDART)
    set(ERA_CUDART "${CUDA_cudart_LIBRARY}")
  endif()
  if(NOT ERA_CUDART)
    message(FATAL_ERROR "era: CUDA kernels are built, but no CUDA runtime library was found for era.pc")
  endif()
  get_filename_component(ERA_CUDART_DIR "${ERA_CUDART}" DIRECTORY)
  string(APPEND ERA_PC_TORCH_LIBS " -L${ERA_CUDART_DIR} -Wl,-rpath,${ERA_CUDART_DIR} -lcudart")
endif()
foreach(lib IN LISTS ERA_OPENMP_LIBS)  # era's parallel kernels (CMakeLists.txt, ERA_PARALLEL_FOR_SOURCES)
  string(APPEND ERA_PC_TORCH_LIBS " ${lib}")
endforeach()
string(APPEND ERA_PC_TORCH_LIBS " -lopencv_videoio -lopencv_imgcodecs -lopencv_imgproc -lopencv_core -lgif -licui18n -licuuc")
if(ERA_SANITIZE)  # a sanitizer build (tools/sanitize.sh): its users link the same runtime
  string(APPEND ERA_PC_TORCH_LIBS " -fsanitize=${ERA_SANITIZE}")
endif()
# The prefix is taken from where era.pc lies, so the tree works wherever it is installed or moved.
file(RELATIVE_PATH ERA_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" ERA_PC_TO_PREFIX "${ERA_PC_TO_PREFIX}")
configure_file(cmake/era.pc.in ${CMAKE_BINARY_DIR}/package/era.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/era.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
