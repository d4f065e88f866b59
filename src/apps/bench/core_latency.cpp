#include "apps/bench/core_latency.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace era::bench {
namespace {

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The first two CPUs of this thread's affinity mask, or false.
bool first_two_cpus(const cpu_set_t& mask, int& a, int& b) {
  a = b = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && b < 0; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    (a < 0 ? a : b) = cpu;
  }
  return b >= 0;
}

// One run: the caller on `a` writes odd values, a thread on `b` answers with the next even one.
// Returns ns per one-way trip, or 0 if a thread could not be pinned.
double bounce(int a, int b, int64_t round_trips) {
  // its own cache line: nothing else shares it
  struct alignas(64) Line {
    std::atomic<int64_t> value{0};
  };
  Line line;
  std::atomic<bool> pinned{false}, failed{false};
  std::thread other([&] {
    if (!pin_to(b)) {
      failed = true;
      return;
    }
    pinned = true;
    for (int64_t i = 0; i < round_trips; ++i) {
      while (line.value.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });
  while (!pinned && !failed) std::this_thread::yield();
  if (failed) {
    other.join();
    return 0;
  }
  // a caller that cannot be pinned still makes every trip (the other thread waits for them), but
  // its time says nothing about the two CPUs
  const bool caller_pinned = pin_to(a);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < round_trips; ++i) {
    line.value.store(2 * i + 1, std::memory_order_release);
    while (line.value.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  other.join();
  return caller_pinned ? ns / static_cast<double>(round_trips) / 2 : 0;
}

}  // namespace

double core_to_core_ns(int64_t round_trips) {
  cpu_set_t mask;
  if (round_trips <= 0 || pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) != 0) return 0;
  int a = 0, b = 0;
  if (!first_two_cpus(mask, a, b)) return 0;
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const double ns = bounce(a, b, round_trips);
    if (ns <= 0) break;
    best = best > 0 ? std::min(best, ns) : ns;
  }
  pthread_setaffinity_np(pthread_self(), sizeof mask, &mask);
  return best;
}

}  // namespace era::bench
