# `cmake --install build [--prefix P]` lays out era for other projects:
#   P/lib/libera_core.a                       the library (static: one file to ship with an app)
#   P/lib/era/libera_sentencepiece.so         the SentencePiece shim the library dlopens
#   P/include/era/{era,reduce}/*.h            the public headers (include root: P/include/era)
#   P/lib/cmake/era/era-config.cmake          find_package(era CONFIG) -> imported target era::era
#   P/lib/pkgconfig/era.pc                    pkg-config --cflags --libs era
#   P/bin/era_infer, ...                      the command-line tools (installed where they are
#                                             defined, CMakeLists.txt); they find the shim in ../lib/era
include(CMakePackageConfigHelpers)

set(ERA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/era)

install(TARGETS era_core EXPORT era-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS era_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/era)  # = ERA_SHIM_INSTALL_RELDIR

# era/era.h and everything it includes, transitively (kept in sync by tests/package: the outside
# project compiles against the installed tree only).
install(FILES src/era/era.h src/era/error.h src/era/image.h src/era/shim_location.h
              ${CMAKE_BINARY_DIR}/generated/public/era/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/era/era)
install(FILES src/reduce/era_options.h src/reduce/baseline_options.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/era/reduce)
# The reduction picture (kept tokens, clusters) for apps that show it, as examples/desktop does.
install(FILES src/report/reduction_viz.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/era/report)

install(EXPORT era-targets NAMESPACE era:: DESTINATION ${ERA_CMAKE_DIR})
set(ERA_SHIM_INSTALL_RELDIR ${CMAKE_INSTALL_LIBDIR}/era)
configure_package_config_file(cmake/era-config.cmake.in ${CMAKE_BINARY_DIR}/package/era-config.cmake
  INSTALL_DESTINATION ${ERA_CMAKE_DIR} PATH_VARS ERA_SHIM_INSTALL_RELDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/era-config-version.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: a minor release may break the API
install(FILES ${CMAKE_BINARY_DIR}/package/era-config.cmake ${CMAKE_BINARY_DIR}/package/era-config-version.cmake
        DESTINATION ${ERA_CMAKE_DIR})

# ---- pkg-config ------------------------------------------------------------------------------
# LibTorch ships no .pc file, so its flags are written out from the LibTorch this build used
# (Debian: /usr/lib/x86_64-linux-gnu); OpenCV and spdlog come through Requires.
get_filename_component(ERA_TORCH_LIBDIR "${TORCH_LIBRARY}" DIRECTORY)
set(ERA_PC_TORCH_CFLAGS "${TORCH_CXX_FLAGS}")
foreach(dir ${TORCH_INCLUDE_DIRS})
  string(APPEND ERA_PC_TORCH_CFLAGS " -I${dir}")
endforeach()
set(ERA_PC_TORCH_LIBS "-L${ERA_TORCH_LIBDIR} -Wl,--no-as-needed -ltorch -ltorch_cpu")
if(TARGET torch_cuda)
  string(APPEND ERA_PC_TORCH_LIBS " -ltorch_cuda")
endif()
string(APPEND ERA_PC_TORCH_LIBS " -Wl,--as-needed -lc10")
# The prefix is taken from where era.pc lies, so the tree works wherever it is installed or moved.
file(RELATIVE_PATH ERA_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" ERA_PC_TO_PREFIX "${ERA_PC_TO_PREFIX}")
configure_file(cmake/era.pc.in ${CMAKE_BINARY_DIR}/package/era.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/era.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
