#pragma once
// Server-sent events as OpenAI streams them: each chunk is one "data: <json>" event followed by a
// blank line, and the stream ends with "data: [DONE]".
#include <nlohmann/json.hpp>

#include <string>

namespace era::server {

// One event carrying `payload` on a single line (JSON's own escaping keeps newlines out of it).
std::string sse_event(const nlohmann::json& payload);

// The terminating event.
std::string sse_done();

// JSON text for a response: one line, and any invalid UTF-8 a model produced replaced (U+FFFD)
// rather than failing the whole response.
std::string dump_json(const nlohmann::json& value);

}  // namespace era::server
