#pragma once
// An OpenAI chat-completions request body -> an era::Request. Every field is checked here, before
// the request is queued, and a bad one is refused with ApiError(400) whose message and `param`
// name it the way the JSON spells it ("messages[2].content[1].image_url.url").
//
// Mapping: a leading "system" (or "developer") message -> Request::system; then user and
// assistant messages alternating, starting and ending with a user message: the earlier pairs
// -> Request::history, the last user message -> Request::prompt. Content is a string or a list
// of parts {"type":"text","text":...} / {"type":"image_url","image_url":{"url":...}}; the parts
// of one message are joined with "\n", each image part becoming an "<image>" placeholder there,
// and the images fill Request::image_buffers in order. The extension field "era" chooses the
// reduction per request: {"method", "tokens", "keep_ratio", "scope", "era_set", "method_set",
// "ignore_eos"} (as era_infer's --method, --tokens, ... flags).
#include <nlohmann/json.hpp>

#include <string>

#include "apps/server/image_source.h"
#include "era/era.h"

namespace era::server {

struct ChatRequest {
  Request request;    // on_text unset: the server sets it
  std::string model;  // as the client named it ("" if it did not)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk carrying usage
};

// `defaults`: the server's flags (max tokens, sampling, reduction) that fields override; `model`:
// the loaded model, for the checks that depend on it (max_tokens below its context); null: the
// model-independent checks only. Throws ApiError (400, or 403 for a refused image source).
ChatRequest parse_chat_request(const nlohmann::json& body, const Request& defaults, const ImageSourcePolicy& images,
                               const ModelInfo* model = nullptr);

// The body as received: ApiError(400) if it is not JSON, nests deeper than kMaxJsonDepth or holds
// a number beyond a double's range (1e400: valid JSON, refused naming its field).
ChatRequest parse_chat_request(const std::string& body, const Request& defaults, const ImageSourcePolicy& images,
                               const ModelInfo* model = nullptr);

nlohmann::json parse_json_body(const std::string& body);
inline constexpr int kMaxJsonDepth = 64;

}  // namespace era::server
