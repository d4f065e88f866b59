#pragma once
// An era::Result as OpenAI chat-completion JSON: the whole answer ("chat.completion") or the
// pieces of a stream ("chat.completion.chunk"), with usage and the "era" extension (visual
// tokens, method, timings).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "era/era.h"

namespace era::server {

// What every object of one answer shares.
struct CompletionIdentity {
  std::string id;       // "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;    // the bundle's name
};

// OpenAI's finish_reason for the library's: "eos" -> "stop", "length" -> "length",
// "cancelled" -> "cancelled", or "timeout" when the server stopped it at --timeout-s.
std::string finish_reason(const Result& result, bool timed_out);

nlohmann::json usage_json(const Result& result);

// {"method", "visual_tokens", "prompt_tokens", "text_tokens", "stats": {...}}.
nlohmann::json era_json(const Request& request, const Result& result);

nlohmann::json completion_json(const CompletionIdentity& id, const Request& request, const Result& result, bool timed_out);

// A chunk carrying `delta` (a "delta" object, e.g. {"content": "..."}), finish_reason null.
nlohmann::json chunk_json(const CompletionIdentity& id, const nlohmann::json& delta);

// The last content chunk: empty delta, the finish reason, usage and the era extension.
nlohmann::json final_chunk_json(const CompletionIdentity& id, const Request& request, const Result& result, bool timed_out);

// stream_options.include_usage: one more chunk with no choices and the usage.
nlohmann::json usage_chunk_json(const CompletionIdentity& id, const Result& result);

}  // namespace era::server
