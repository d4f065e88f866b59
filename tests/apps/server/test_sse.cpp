// The streamed format: one "data: <json>" line per event, a blank line after each, [DONE] last,
// and model text that is not valid UTF-8 replaced rather than failing the stream.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/server/openai_response.h"
#include "apps/server/sse.h"

namespace era::server {
namespace {

TEST(Sse, EventsAreSingleDataLinesEndedByABlankLine) {
  const std::string event = sse_event({{"text", "two\nlines"}});
  EXPECT_EQ(event, "data: {\"text\":\"two\\nlines\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(dump_json(nlohmann::json(std::string("a\xff"
                                                 "b"))),
            "\"a\xEF\xBF\xBD"
            "b\"");
}

TEST(Sse, ChunksAndTheFinalChunkCarryWhatClientsRead) {
  const CompletionIdentity id{"chatcmpl-1", 5, "tiny"};
  const nlohmann::json chunk = chunk_json(id, {{"content", "hi"}});
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "hi");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  Request request;
  request.reduction.method = "era";
  Result result;
  result.finish_reason = "eos";
  result.stats.prompt_tokens = 10;
  result.stats.generated_tokens = 3;
  result.stats.visual_tokens = 64;
  const nlohmann::json last = final_chunk_json(id, request, result, false);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(last["usage"]["completion_tokens"], 3);
  EXPECT_EQ(last["usage"]["total_tokens"], 13);
  EXPECT_EQ(last["era"]["visual_tokens"], 64);
  EXPECT_EQ(last["era"]["method"], "era");
  result.finish_reason = "length";
  EXPECT_EQ(completion_json(id, request, result, false)["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(completion_json(id, request, result, true)["choices"][0]["finish_reason"], "timeout");
  EXPECT_TRUE(usage_chunk_json(id, result)["choices"].empty());
}

}  // namespace
}  // namespace era::server
