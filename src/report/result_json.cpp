#include "report/result_json.h"

#include <cmath>

namespace era {

const std::vector<StageTime>& stage_times() {
  static const std::vector<StageTime> stages = {
      {"preprocess", &Stats::preprocess_ms}, {"vision", &Stats::vision_ms}, {"reduce", &Stats::reduce_ms},
      {"prefill", &Stats::prefill_ms},       {"decode", &Stats::decode_ms}, {"total", &Stats::total_ms},
  };
  return stages;
}

nlohmann::ordered_json timings_json(const Stats& s, bool round_to_us) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& stage : stage_times()) {
    const double ms = s.*stage.ms;
    j[std::string(stage.name) + "_ms"] = round_to_us ? std::round(ms * 1000.0) / 1000.0 : ms;
  }
  return j;
}

nlohmann::ordered_json stats_json(const Stats& s) {
  nlohmann::ordered_json j = timings_json(s);
  j["decode_step_ms"] = s.decode_step_ms;
  j["visual_tokens"] = s.visual_tokens;
  j["visual_tokens_early_layers"] = s.visual_tokens_early_layers;
  j["text_tokens"] = s.text_tokens;
  j["prompt_tokens"] = s.prompt_tokens;
  j["generated_tokens"] = s.generated_tokens;
  j["kv_cache_bytes"] = s.kv_cache_bytes;
  j["kv_cache_allocated_bytes"] = s.kv_cache_allocated_bytes;
  return j;
}

nlohmann::ordered_json reduction_json(const ImageReduction& r) {
  return {{"method", r.method},
          {"media", r.media == MediaKind::kVideo ? "video" : "image"},
          {"original_tokens", r.original_tokens},
          {"kept_tokens", r.kept.size()},
          {"kept", r.kept},
          {"assignment", r.assignment},
          {"cluster_sizes", r.cluster_sizes},
          {"bias", r.bias},
          {"entropy", r.entropy}};
}

}  // namespace era
