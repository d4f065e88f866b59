# era_link_spdlog(target): link spdlog and make sure the target compiles against the fmt that
# spdlog was built for.
#
# Why: PyTorch's wheels ship their own fmt headers (fmt 12 in torch 2.11) in <torch>/include/fmt,
# and that folder is on every LibTorch user's include path. Debian's spdlog 1.10 is built against
# Debian's fmt 9 (SPDLOG_FMT_EXTERNAL) and does not compile against fmt 12 ("basic_runtime is not a
# member of fmt"). A folder holding only a link `fmt` -> the fmt spdlog wants, put first on the
# target's include path (a plain -I is searched before LibTorch's -isystem folders), gives spdlog its
# own fmt while everything else of LibTorch stays as it is. LibTorch's public headers that era
# includes (torch/script.h) do not include fmt, so the two versions never meet in one file.
function(era_link_spdlog target)
  target_link_libraries(${target} PRIVATE spdlog::spdlog)
  if(NOT EXISTS "${TORCH_INSTALL_PREFIX}/include/fmt" OR NOT TARGET fmt::fmt)
    return()
  endif()
  get_target_property(fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  foreach(dir IN LISTS fmt_includes)
    if(EXISTS "${dir}/fmt/core.h")
      set(shim "${CMAKE_BINARY_DIR}/generated/spdlog-fmt")
      if(NOT EXISTS "${shim}/fmt")
        file(MAKE_DIRECTORY "${shim}")
        file(CREATE_LINK "${dir}/fmt" "${shim}/fmt" SYMBOLIC)
      endif()
      target_include_directories(${target} BEFORE PRIVATE "${shim}")
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "era: LibTorch at ${TORCH_INSTALL_PREFIX} ships its own fmt headers, and the "
                      "fmt that spdlog was built against was not found in '${fmt_includes}'")
endfunction()
