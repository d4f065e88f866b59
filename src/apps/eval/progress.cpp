#include "apps/eval/progress.h"

#include <cmath>

namespace era::eval {
namespace {

std::string format_numbers(const char* format, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a, b);
  return buf;
}

struct Rates {
  double per_second = 0, eta = -1;
};
Rates rates(int64_t done, int64_t total, double elapsed_s) {
  Rates r;
  if (done > 0 && elapsed_s > 0) {
    r.per_second = static_cast<double>(done) / elapsed_s;
    r.eta = static_cast<double>(total - done) / r.per_second;
  }
  return r;
}

}  // namespace

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

std::string Progress::format_status(int64_t done, int64_t total, int64_t errors, double elapsed_s) {
  const Rates r = rates(done, total, elapsed_s);
  const double pct = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  return std::to_string(done) + "/" + std::to_string(total) + " (" + format_numbers("%.1f", pct) + "%), " +
         format_numbers("%.2f", r.per_second) + " items/s, ETA " + format_duration(r.eta) + ", elapsed " +
         format_duration(elapsed_s) + ", errors " + std::to_string(errors);
}

std::string Progress::format_bar(int64_t done, int64_t total, int64_t errors, double elapsed_s, int width) {
  const Rates r = rates(done, total, elapsed_s);
  const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  const int filled = static_cast<int>(frac * width);
  std::string bar =
      "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "]";
  return bar + " " + std::to_string(done) + "/" + std::to_string(total) + " " + format_numbers("%5.1f", 100.0 * frac) + "% " +
         format_numbers("%.2f", r.per_second) + " items/s ETA " + format_duration(r.eta) + " errors " + std::to_string(errors);
}

Progress::Progress(std::FILE* out, int64_t total, const ProgressOptions& options)
    : out_(out), total_(total), options_(options), start_(Clock::now()), last_log_(start_) {
  next_log_ = options_.log_every > 0 ? options_.log_every : total_ + 1;
}

double Progress::elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void Progress::draw() {
  std::fprintf(out_, "\r%s\x1b[K", format_bar(done_, total_, errors_, elapsed(), options_.bar_width).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::update(int64_t done, int64_t errors) {
  done_ = done;
  errors_ = errors;
  if (options_.terminal) return draw();
  const auto now = Clock::now();
  const bool by_count = done_ >= next_log_;
  const bool by_time = std::chrono::duration<double>(now - last_log_).count() >= options_.log_seconds;
  if (!by_count && !by_time) return;
  while (options_.log_every > 0 && next_log_ <= done_) next_log_ += options_.log_every;
  last_log_ = now;
  std::fprintf(out_, "era_eval: %s\n", format_status(done_, total_, errors_, elapsed()).c_str());
  std::fflush(out_);
}

void Progress::message(const std::string& line) {
  if (options_.terminal && drawn_) std::fprintf(out_, "\r\x1b[K");
  std::fprintf(out_, "%s\n", line.c_str());
  if (options_.terminal && drawn_) draw();
  std::fflush(out_);
}

void Progress::finish() {
  if (options_.terminal) {
    if (drawn_) std::fprintf(out_, "\n");
  } else if (total_ > 0) {
    std::fprintf(out_, "era_eval: %s\n", format_status(done_, total_, errors_, elapsed()).c_str());
  }
  std::fflush(out_);
}

}  // namespace era::eval
