#include "apps/eval/answer_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "era/error.h"

namespace era::eval {
namespace {

std::string errno_text() { return std::strerror(errno); }

[[noreturn]] void fail(ErrorCode code, const std::string& what) { throw Error(code, what + ": " + errno_text()); }

// Makes a rename or a file creation in the folder durable; best effort (not every filesystem
// lets a folder be fsync'ed).
void sync_parent_dir(const std::string& path) {
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Writes all of `data` at the descriptor's position; false with errno set on failure.
bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string read_all(int fd, int64_t size, const std::string& path) {
  std::string content(static_cast<size_t>(size), '\0');
  int64_t got = 0;
  while (got < size) {
    const ssize_t r = ::pread(fd, content.data() + got, static_cast<size_t>(size - got), got);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::kInvalidArgument, "cannot read " + path);
    }
    if (r == 0) break;
    got += r;
  }
  content.resize(static_cast<size_t>(got));
  return content;
}

// Opens `path` (creating it with `flags`) and takes its exclusive lock without waiting; makes sure
// the locked inode is still the one the path names (a concurrent replace() may have renamed a new
// file over it, or a finishing holder unlinked it), retrying on the new file. `in_use` is the
// message when another process holds the lock; `what` names the file in other errors.
int open_and_lock(const std::string& path, int flags, const std::string& what, const std::string& in_use) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), flags | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail(ErrorCode::kInvalidArgument, "cannot open " + what);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) throw Error(ErrorCode::kInvalidArgument, in_use);
      errno = err;
      fail(ErrorCode::kInvalidArgument, "cannot lock " + what);
    }
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      return fd;
    }
    ::close(fd);  // replaced while we were locking it: lock the new one
  }
  throw Error(ErrorCode::kInvalidArgument, "cannot lock " + what + " (it keeps being replaced)");
}

int open_locked(const std::string& path, int extra_flags) {
  return open_and_lock(path, O_RDWR | O_APPEND | extra_flags, "the answers file " + path,
                       "the answers file " + path + " is in use by another process (another era_eval run?)");
}

std::vector<std::string> split_lines(const std::string& content) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < content.size()) {
    const size_t nl = content.find('\n', start);
    if (nl == std::string::npos) break;
    lines.push_back(content.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += l;
    out += '\n';
  }
  return out;
}

std::string temp_path(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

}  // namespace

namespace {

// The run locks this process holds: lock file -> (descriptor, holders).
struct HeldLock {
  int fd = -1;
  int holders = 0;
};
std::mutex& held_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, HeldLock>& held_locks() {
  static std::map<std::string, HeldLock> locks;
  return locks;
}

}  // namespace

AnswersLock::AnswersLock(const std::string& answers_path) : lock_path_(answers_path + ".lock") {
  std::lock_guard<std::mutex> guard(held_mutex());
  HeldLock& held = held_locks()[lock_path_];
  if (held.holders > 0) {
    ++held.holders;
    return;
  }
  // A holder that is just finishing unlinks its lock file before it unlocks, so a lock won on an
  // unlinked inode is retried on the new file (open_and_lock).
  try {
    held.fd = open_and_lock(
        lock_path_, O_RDWR | O_NONBLOCK, "the lock file " + lock_path_ + " of the answers file " + answers_path,
        "the answers file " + answers_path + " is in use by another process (another era_eval run holds " + lock_path_ + ")");
  } catch (...) {
    held_locks().erase(lock_path_);
    throw;
  }
  held.holders = 1;
}

AnswersLock::~AnswersLock() {
  std::lock_guard<std::mutex> guard(held_mutex());
  auto it = held_locks().find(lock_path_);
  if (it == held_locks().end() || --it->second.holders > 0) return;
  ::unlink(lock_path_.c_str());  // while still locked: see the constructor
  ::close(it->second.fd);
  held_locks().erase(it);
}

AnswerFile::AnswerFile(const std::string& path) : path_(path) {
  fd_ = open_locked(path, 0);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    ::close(fd_);
    fail(ErrorCode::kInvalidArgument, "cannot stat " + path);
  }
  std::string content;
  try {
    content = read_all(fd_, st.st_size, path);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  const size_t last_nl = content.rfind('\n');
  const int64_t keep = last_nl == std::string::npos ? 0 : static_cast<int64_t>(last_nl) + 1;
  torn_bytes_ = static_cast<int64_t>(content.size()) - keep;
  if (torn_bytes_ > 0) {
    if (::ftruncate(fd_, keep) != 0 || ::fsync(fd_) != 0) {
      const int err = errno;
      ::close(fd_);
      errno = err;
      fail(ErrorCode::kInvalidArgument, "cannot cut the incomplete last line of " + path);
    }
    content.resize(static_cast<size_t>(keep));
  }
  size_ = keep;
  lines_ = split_lines(content);
  sync_parent_dir(path);  // the file may have just been created
}

AnswerFile::~AnswerFile() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

void AnswerFile::append(const std::string& line) {
  if (line.find('\n') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "internal: an answer record must be a single line");
  }
  const std::string buf = line + '\n';
  if (!write_all(fd_, buf.data(), buf.size())) {
    const int err = errno;
    if (::ftruncate(fd_, size_) == 0) ::fdatasync(fd_);  // no half line left behind
    errno = err;
    fail(ErrorCode::kRuntime, "cannot write to " + path_);
  }
  if (::fdatasync(fd_) != 0) fail(ErrorCode::kRuntime, "cannot flush " + path_);
  size_ += static_cast<int64_t>(buf.size());
}

void AnswerFile::replace(const std::vector<std::string>& lines) {
  const std::string tmp = temp_path(path_);
  const int fd = ::open(tmp.c_str(), O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorCode::kRuntime, "cannot create " + tmp);
  const std::string content = join_lines(lines);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || !write_all(fd, content.data(), content.size()) || ::fsync(fd) != 0 ||
      ::rename(tmp.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = err;
    fail(ErrorCode::kRuntime, "cannot rewrite " + path_);
  }
  sync_parent_dir(path_);
  ::close(fd_);
  fd_ = fd;
  size_ = static_cast<int64_t>(content.size());
  lines_ = lines;
}

void write_lines_atomically(const std::string& path, const std::vector<std::string>& lines) {
  const std::string tmp = temp_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorCode::kRuntime, "cannot create " + tmp);
  const std::string content = join_lines(lines);
  if (!write_all(fd, content.data(), content.size()) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    errno = err;
    fail(ErrorCode::kRuntime, "cannot write " + tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    fail(ErrorCode::kRuntime, "cannot rename " + tmp + " to " + path);
  }
  sync_parent_dir(path);
}

}  // namespace era::eval
