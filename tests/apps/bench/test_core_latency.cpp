// era_bench --machine's core-to-core latency (bench/core_latency.h): a positive time where the
// process may run on two CPUs, 0 where it may run on one, and the caller's affinity unchanged.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include "apps/bench/core_latency.h"

namespace era::bench {
namespace {

cpu_set_t affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof mask, &mask), 0);
  return mask;
}

TEST(CoreLatency, TimesTwoCpusAndRestoresTheAffinity) {
  const cpu_set_t before = affinity();
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "this process may run on one CPU";
  const double ns = core_to_core_ns(20000);
  EXPECT_GT(ns, 1.0);  // a cache line between two cores: tens to hundreds of ns
  EXPECT_LT(ns, 1e5);
  const cpu_set_t after = affinity();
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST(CoreLatency, OneCpuGivesNothingToTime) {
  const cpu_set_t before = affinity();
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &before)) ++first;
  ASSERT_LT(first, CPU_SETSIZE);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
  EXPECT_EQ(core_to_core_ns(1000), 0.0);
  const cpu_set_t still = affinity();
  EXPECT_TRUE(CPU_EQUAL(&one, &still));
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  EXPECT_EQ(core_to_core_ns(0), 0.0);
}

}  // namespace
}  // namespace era::bench
