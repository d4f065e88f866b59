#include "apps/server/beneath_open.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

namespace era::server {
namespace {

// A seccomp filter answers a syscall it does not know with ENOSYS (Docker's default) or EPERM;
// E2BIG: a kernel that knows openat2 but not this struct's size.
bool means_unavailable(int err) { return err == ENOSYS || err == EPERM || err == E2BIG; }

int call_openat2(int dir_fd, const char* path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, dir_fd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    // EAGAIN: a rename or mount elsewhere raced the ".." handling and the kernel, unable to
    // prove the walk stayed beneath, gave up; it asks for a retry. EINTR: a slow filesystem.
    if ((errno == EAGAIN && attempt < 16) || errno == EINTR) continue;
    return -errno;
  }
}

// The fallback: one component at a time, no symbolic link followed, a descriptor held for each
// folder entered so that ".." returns to the folder actually passed through (never above the
// start), whatever is renamed meanwhile.
int walk(int dir_fd, const std::string& relative, int flags) {
  std::vector<std::string> parts;
  for (size_t at = 0; at <= relative.size();) {
    size_t slash = relative.find('/', at);
    if (slash == std::string::npos) slash = relative.size();
    const std::string part = relative.substr(at, slash - at);
    if (!part.empty() && part != ".") parts.push_back(part);
    at = slash + 1;
  }
  std::vector<int> held;  // the folders entered, innermost last (dir_fd itself is the caller's)
  const auto top = [&] { return held.empty() ? dir_fd : held.back(); };
  const auto fail = [&](int err) {
    for (int fd : held) ::close(fd);
    return -err;
  };
  // The last component names the file unless it is ".." (then the path names a folder).
  const bool last_is_name = !parts.empty() && parts.back() != "..";
  const size_t folders = last_is_name ? parts.size() - 1 : parts.size();
  for (size_t i = 0; i < folders; ++i) {
    if (parts[i] == "..") {
      if (held.empty()) return fail(EXDEV);
      ::close(held.back());
      held.pop_back();
      continue;
    }
    int fd;
    do fd = ::openat(top(), parts[i].c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return fail(errno);
    held.push_back(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail(errno);
    // O_PATH | O_NOFOLLOW opens a symbolic link itself: refused, wherever it points.
    if (S_ISLNK(st.st_mode)) return fail(ELOOP);
    if (!S_ISDIR(st.st_mode)) return fail(ENOTDIR);
  }
  int fd;
  do fd = ::openat(top(), last_is_name ? parts.back().c_str() : ".", flags | O_NOFOLLOW | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return fail(errno);
  if (flags & O_PATH) {  // O_PATH | O_NOFOLLOW opened a last component that is a link, not ELOOP
    struct stat st {};
    const int err = ::fstat(fd, &st) != 0 ? errno : S_ISLNK(st.st_mode) ? ELOOP : 0;
    if (err) {
      ::close(fd);
      return fail(err);
    }
  }
  for (int h : held) ::close(h);
  return fd;
}

}  // namespace

bool openat2_available() {
  static const bool available = [] {
    const int fd = call_openat2(AT_FDCWD, ".", O_PATH);
    if (fd >= 0) ::close(fd);
    return !(fd < 0 && means_unavailable(-fd));
  }();
  return available;
}

int open_beneath(int dir_fd, const std::string& relative, int flags, BeneathMode mode) {
  if (relative.find('\0') != std::string::npos) return -EINVAL;
  if (!relative.empty() && relative[0] == '/') return -EXDEV;
  if (relative.size() >= PATH_MAX) return -ENAMETOOLONG;
  const std::string path = relative.empty() ? "." : relative;
  if (mode == BeneathMode::kAuto && openat2_available()) {
    const int fd = call_openat2(dir_fd, path.c_str(), flags);
    // EPERM here is the file's own answer (a seal, fanotify): the probe said openat2 works.
    if (fd >= 0 || (-fd != ENOSYS && -fd != E2BIG)) return fd;
  }
  return walk(dir_fd, path, flags);
}

}  // namespace era::server
