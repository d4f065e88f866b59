#pragma once
// Opening a file by a path relative to a directory descriptor, so that the result is always
// inside that directory whatever the path's components are (or become, while it is being
// opened): "..", absolute symbolic links and symbolic links leading out are refused by the
// kernel's own path walk, not by a check of the name made beforehand. era_server reads local
// images through it (server/image_source.h): a check of the name followed by an open of the name
// can be raced by anyone who can write inside an allowed folder (swap a folder for a symbolic
// link to outside between the two), a descriptor-relative open cannot.
//
// Two ways, the same guarantee:
//  - openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux 5.6+): the kernel resolves
//    the path, following symbolic links that stay beneath the directory, and fails with EXDEV
//    at the first step out of it ("..", an absolute link, a relative link climbing out).
//  - where openat2 is missing (an older kernel: ENOSYS; a seccomp filter that refuses it:
//    ENOSYS or EPERM), a walk of one openat(2) a component, O_NOFOLLOW, holding a descriptor of
//    each folder passed, ".." popping back to the held parent and refused above the start. It
//    follows no symbolic link at all, so it also refuses links that would stay inside (ELOOP):
//    stricter than openat2, never looser.
#include <string>

namespace era::server {

enum class BeneathMode {
  kAuto,      // openat2 where the kernel has it, the walk where it does not
  kWalkOnly,  // always the walk (tests: the fallback must hold on its own)
};

// Opens `relative` beneath the directory `dir_fd` with `flags` (O_PATH or O_RDONLY plus any of
// O_NONBLOCK, O_NOCTTY; O_CLOEXEC is always added). "" and "." name the directory itself; an
// absolute `relative` is refused. Returns the descriptor, or -errno: -EXDEV for any step out of
// the directory, -ELOOP for a symbolic link the walk refuses (or a loop), -ENOENT / -ENOTDIR for
// a missing component, other errors as the kernel gives them.
int open_beneath(int dir_fd, const std::string& relative, int flags, BeneathMode mode = BeneathMode::kAuto);

// Whether this process can use openat2 (probed once; false on kernels before 5.6 or under a
// seccomp filter that refuses it). kAuto then walks.
bool openat2_available();

}  // namespace era::server
