#pragma once
// The answers JSONL as a crash-safe, append-only log. Every record is one line written with a
// single write() on an O_APPEND descriptor and then fdatasync'ed, so after a crash or SIGKILL the
// file holds complete lines plus, at worst, one incomplete last line (a write cut short). Opening
// the file cuts that torn tail away (ftruncate to the last '\n', fsync), so a rerun never sees a
// half record and never appends to one. An exclusive flock() keeps a second process off the same
// file (it is released when the holder dies, even by SIGKILL). Whole-file rewrites (dropping old
// error records, restoring line order) go through a temporary file, fsync and rename(), so they are
// atomic too.
#include <cstdint>
#include <string>
#include <vector>

namespace era::eval {

// The run lock of one answers file: an exclusive flock on "<answers>.lock", a file that is never
// renamed, so it guards the path itself across the atomic rewrites that give the answers file a
// new inode (a lock on the answers file alone can be lost between the rename and the relock).
// era_eval takes it before the model loads, so a second process on the same answers file is
// refused at once, whatever the timing. Locks of one path within a process are shared (the
// runner takes it again under era_eval's). The lock file is removed when the last holder ends;
// a SIGKILLed holder leaves it behind, unlocked and harmless.
class AnswersLock {
 public:
  // Throws era::Error(kInvalidArgument) naming the answers file if another process holds it.
  explicit AnswersLock(const std::string& answers_path);
  AnswersLock(const AnswersLock&) = delete;
  AnswersLock& operator=(const AnswersLock&) = delete;
  ~AnswersLock();

 private:
  std::string lock_path_;
};

class AnswerFile {
 public:
  // Opens or creates `path`, locks it and cuts a torn last line. Throws era::Error(kInvalidArgument)
  // if the file cannot be opened or another process holds it.
  explicit AnswerFile(const std::string& path);
  AnswerFile(const AnswerFile&) = delete;
  AnswerFile& operator=(const AnswerFile&) = delete;
  ~AnswerFile();

  const std::string& path() const { return path_; }
  // The complete lines the file held when opened (or after the last replace), without newlines.
  const std::vector<std::string>& existing_lines() const { return lines_; }
  // Bytes of an incomplete last line removed when opening (0 if the file ended cleanly).
  int64_t torn_bytes() const { return torn_bytes_; }

  // Appends `line` (which must not contain a newline) plus '\n' as one write, then fdatasync.
  // Throws era::Error(kRuntime) on a write error (disk full, ...), after cutting off any partial
  // write so the file still ends with a complete line.
  void append(const std::string& line);

  // Atomically replaces the whole file with `lines` (temporary file + fsync + rename); the lock
  // moves to the new file. Throws era::Error(kRuntime) on failure (the old file is then untouched).
  void replace(const std::vector<std::string>& lines);

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t torn_bytes_ = 0;
  std::vector<std::string> lines_;
};

// Writes `lines` to `path` atomically (temporary file in the same folder, fsync, rename, fsync of
// the folder). Throws era::Error(kRuntime) on failure.
void write_lines_atomically(const std::string& path, const std::vector<std::string>& lines);

}  // namespace era::eval
