#pragma once
// Internal (era_bench --machine): how far apart the first two CPUs this process may run on are,
// as the time one cache line takes to go from one to the other.
//
// Why it is measured: on a VM whose host is an AMD EPYC, the hypervisor moves the two vCPUs
// between cores of one core complex (one L3, one link to the memory) and cores of two. The
// second placement reads memory faster (two links: about 85 against 50 GB/s on the Zen 5 VM of
// docs/perf/amd-epyc-zen5.md) and passes data between the threads slower (230-290 against 40-90 ns here), and
// a kernel whose threads share what they write slows down there. The latency names the placement
// that a run met.
#include <cstdint>

namespace era::bench {

// One-way latency in ns between the first two CPUs of the affinity mask: two threads pinned
// there bounce one atomic `round_trips` times (best of three runs, half a round trip each);
// 0 where the mask has fewer than two CPUs or pinning fails. The calling thread's affinity is
// restored.
double core_to_core_ns(int64_t round_trips = 100000);

}  // namespace era::bench
