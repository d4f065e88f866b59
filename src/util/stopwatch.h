#pragma once
// Wall-clock milliseconds for the per-stage statistics (steady clock: immune to clock changes).
#include <chrono>

namespace era {

class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;
  Stopwatch() : start_(Clock::now()), lap_(start_) {}
  // Milliseconds since construction.
  double elapsed_ms() const { return ms(start_, Clock::now()); }
  // Milliseconds since the previous lap (or construction); starts the next lap.
  double lap_ms() {
    const auto now = Clock::now();
    const double d = ms(lap_, now);
    lap_ = now;
    return d;
  }
  void restart() { start_ = lap_ = Clock::now(); }

 private:
  static double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }
  Clock::time_point start_, lap_;
};

}  // namespace era
