#include "apps/server/openai_response.h"

#include "report/result_json.h"

namespace era::server {

using nlohmann::json;

std::string finish_reason(const Result& result, bool timed_out) {
  if (timed_out) return "timeout";
  if (result.finish_reason == "eos") return "stop";
  return result.finish_reason;  // "length", "cancelled"
}

json usage_json(const Result& result) {
  return {{"prompt_tokens", result.stats.prompt_tokens},
          {"completion_tokens", result.stats.generated_tokens},
          {"total_tokens", result.stats.prompt_tokens + result.stats.generated_tokens}};
}

json era_json(const Request& request, const Result& result) {
  json kept = json::array();
  for (const auto& r : result.reductions)
    kept.push_back({{"original_tokens", r.original_tokens}, {"kept_tokens", r.kept.size()}});
  return {{"method", request.reduction.method},          {"tokens", request.reduction.tokens},
          {"visual_tokens", result.stats.visual_tokens}, {"text_tokens", result.stats.text_tokens},
          {"prompt_tokens", result.stats.prompt_tokens}, {"images", kept},
          {"stats", json(stats_json(result.stats))}};
}

json completion_json(const CompletionIdentity& id, const Request& request, const Result& result, bool timed_out) {
  return {{"id", id.id},
          {"object", "chat.completion"},
          {"created", id.created},
          {"model", id.model},
          {"choices", json::array({{{"index", 0},
                                    {"message", {{"role", "assistant"}, {"content", result.text}}},
                                    {"logprobs", nullptr},
                                    {"finish_reason", finish_reason(result, timed_out)}}})},
          {"usage", usage_json(result)},
          {"era", era_json(request, result)}};
}

json chunk_json(const CompletionIdentity& id, const json& delta) {
  return {{"id", id.id},
          {"object", "chat.completion.chunk"},
          {"created", id.created},
          {"model", id.model},
          {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})}};
}

json final_chunk_json(const CompletionIdentity& id, const Request& request, const Result& result, bool timed_out) {
  json chunk = chunk_json(id, json::object());
  chunk["choices"][0]["finish_reason"] = finish_reason(result, timed_out);
  chunk["usage"] = usage_json(result);
  chunk["era"] = era_json(request, result);
  return chunk;
}

json usage_chunk_json(const CompletionIdentity& id, const Result& result) {
  json chunk = chunk_json(id, json::object());
  chunk["choices"] = json::array();
  chunk["usage"] = usage_json(result);
  return chunk;
}

}  // namespace era::server
