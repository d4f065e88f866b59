#pragma once
// Progress of an evaluation run on stderr. On a terminal: one line redrawn in place,
//   [##########..........]  120/2374  5.1%  3.42 items/s  ETA 10:59  errors 0
// Otherwise (a log file, a Slurm job): a plain line every `log_every` items or `log_seconds`.
// Other messages (an item's error) go through message() so they never garble the bar.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace era::eval {

struct ProgressOptions {
  bool terminal = false;
  int64_t log_every = 100;    // items between log lines when not on a terminal
  double log_seconds = 10.0;  // and at most this long between them
  int bar_width = 24;
};

class Progress {
 public:
  Progress(std::FILE* out, int64_t total, const ProgressOptions& options);
  void update(int64_t done, int64_t errors);
  void message(const std::string& line);
  void finish();  // ends the bar's line (terminal) or writes a last log line

  // "H:MM:SS" or "M:SS"; "--:--" when unknown (negative or not finite).
  static std::string format_duration(double seconds);
  // The terminal line (without "\r"); the log line is "era_eval: " + format_status(...).
  static std::string format_bar(int64_t done, int64_t total, int64_t errors, double elapsed_s, int width);
  static std::string format_status(int64_t done, int64_t total, int64_t errors, double elapsed_s);

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed() const;
  void draw();

  std::FILE* out_;
  int64_t total_;
  ProgressOptions options_;
  Clock::time_point start_;
  Clock::time_point last_log_;
  int64_t done_ = 0, errors_ = 0, next_log_ = 0;
  bool drawn_ = false;
};

}  // namespace era::eval
