#include "util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace era {

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& what, const std::string& path, const std::string& why) {
  throw Error(code, what + " " + path + ": " + why);
}

uint64_t check_stat(const struct stat& st, const std::string& path, const std::string& what, uint64_t max_bytes, ErrorCode code) {
  if (!S_ISREG(st.st_mode)) fail(code, what, path, "is " + file_kind(st.st_mode) + ", not a file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    fail(code, what, path, "is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  return size;
}

}  // namespace

uint64_t check_input_file(const std::string& path, const std::string& what, uint64_t max_bytes, ErrorCode code) {
  if (path.empty()) fail(code, what, "\"\"", "the path is empty");
  if (path.find('\0') != std::string::npos) fail(code, what, "(path with a NUL byte)", "a path cannot hold a NUL byte");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(code, what, path, errno == ENOENT ? "not found" : std::strerror(errno));
  return check_stat(st, path, what, max_bytes, code);
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes, ErrorCode code) {
  check_input_file(path, what, max_bytes, code);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(code, what, path, std::string("cannot open: ") + std::strerror(errno));
  std::string data;
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(code, what, path, std::strerror(errno));
    data.resize(static_cast<size_t>(check_stat(st, path, what, max_bytes, code)));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(code, what, path, std::string("read failed: ") + std::strerror(errno));
      if (n == 0) break;  // shrank while reading: keep what is there
      got += static_cast<size_t>(n);
    }
    data.resize(got);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return data;
}

}  // namespace era
