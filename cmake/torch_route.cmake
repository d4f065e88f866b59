# Which LibTorch this build uses, checked once after find_package(Torch).
#
# era builds against two LibTorch routes: Debian's packages (LibTorch 1.13, CPU) and the one bundled
# in PyTorch's wheel from the Python package index (tools/setup.sh --route pypi; CUDA-enabled).
# TorchConfig.cmake locates its headers from its own folder but its libraries with find_library,
# which looks on CMAKE_PREFIX_PATH and the system folders first: pointing CMAKE_PREFIX_PATH at
# <torch>/share/cmake on a machine that also has Debian's libtorch-dev gives the wheel's headers
# with Debian's libtorch.so, a mix that compiles and then crashes or fails to link. Refuse it.
get_filename_component(_era_torch_prefix "${TORCH_INSTALL_PREFIX}" REALPATH)
get_filename_component(_era_torch_lib "${TORCH_LIBRARY}" REALPATH)
string(FIND "${_era_torch_lib}" "${_era_torch_prefix}/" _era_at)
if(NOT _era_at EQUAL 0)
  message(FATAL_ERROR
    "era: LibTorch's headers come from ${TORCH_INSTALL_PREFIX} but its library from "
    "${TORCH_LIBRARY}. Point CMAKE_PREFIX_PATH at the torch package folder itself "
    "(python -c 'import torch, os; print(os.path.dirname(torch.__file__))'), not at its share/cmake.")
endif()
if(TARGET c10_cuda)
  set(ERA_TORCH_CUDA ON)
else()
  set(ERA_TORCH_CUDA OFF)
endif()
message(STATUS "era: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX} (CUDA: ${ERA_TORCH_CUDA})")

# The PyPI route asks for a CUDA-enabled LibTorch (tools/setup.sh passes ERA_REQUIRE_CUDA=ON), so
# that era's CUDA code is compiled and linked in CI even on machines without a GPU.
option(ERA_REQUIRE_CUDA "Fail unless the LibTorch found has CUDA" OFF)
if(ERA_REQUIRE_CUDA AND NOT ERA_TORCH_CUDA)
  message(FATAL_ERROR "era: ERA_REQUIRE_CUDA=ON but LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX} "
                      "has no CUDA (no c10_cuda target)")
endif()

# PyTorch's wheels export their own copy of std::filesystem from libtorch.so / libtorch_cpu.so
# (built against an older libstdc++). The dynamic linker binds each symbol to the first library
# in load order that defines it, and libtorch comes before libstdc++ in a normal link line, so
# std::filesystem::remove_all in era's code ran the wheel's copy, which crashed (seen with torch
# 2.11: a null call inside remove_all). Listing libstdc++ first among a program's libraries makes
# every std:: symbol resolve to the real one. Harmless with Debian's LibTorch. Consumers of the
# installed package get the same option (era-config.cmake via the exported target, era.pc).
set(ERA_STDCXX_FIRST "-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state")
