#pragma once
// A Result's statistics and reductions as JSON: one writer for era_infer --json, era_eval's answer
// records and era_bench, so the field names cannot drift apart.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "era/era.h"

namespace era {

// The timed stages of a request, in pipeline order: "preprocess", "vision", "reduce", "prefill",
// "decode" (all steps), "total", with the Stats field of each.
struct StageTime {
  const char* name;
  double Stats::*ms;
};
const std::vector<StageTime>& stage_times();

// {"<stage>_ms": ms, ...} for every stage; `round_to_us` rounds each to microseconds.
nlohmann::ordered_json timings_json(const Stats& stats, bool round_to_us = false);

// Every Stats field: the timings, decode_step_ms, token counts and KV-cache bytes.
nlohmann::ordered_json stats_json(const Stats& stats);

// One image's reduction: method, original/kept token counts, kept, assignment, cluster sizes,
// bias and entropy.
nlohmann::ordered_json reduction_json(const ImageReduction& reduction);

}  // namespace era
