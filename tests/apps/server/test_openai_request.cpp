// OpenAI chat JSON -> era::Request, and every refusal naming its field (no HTTP involved).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "apps/server/api_error.h"
#include "apps/server/image_source.h"
#include "apps/server/openai_request.h"
#include "test_support.h"

namespace era::server {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string sample_png() { return test::source_dir() + "/tests/data/sample.png"; }

// Encoded by OpenSSL's encoder: an independent check of the decoder the server uses.
std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(&out[0]), reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string sample_data_url() { return "data:image/png;base64," + base64(test::read_file(sample_png())); }

ChatRequest parse(const json& body, const ImageSourcePolicy& policy = ImageSourcePolicy()) {
  return parse_chat_request(body, Request{}, policy);
}

// The body must be refused with `status`, `param` as the field, and the field in the message.
void expect_refused(const json& body, int status, const std::string& param,
                    const ImageSourcePolicy& policy = ImageSourcePolicy()) {
  try {
    parse(body, policy);
    FAIL() << "accepted: " << body.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
    const json err = error_body(e);
    EXPECT_EQ(err["error"]["param"], param);
    EXPECT_EQ(err["error"]["message"], e.what());
  }
}

json user(const json& content) { return {{"role", "user"}, {"content", content}}; }

TEST(OpenAiRequest, SingleUserStringBecomesThePrompt) {
  const ChatRequest c = parse({{"model", "x"}, {"messages", {user("Hello there")}}});
  EXPECT_EQ(c.request.prompt, "Hello there");
  EXPECT_TRUE(c.request.history.empty());
  EXPECT_FALSE(c.request.system.has_value());
  EXPECT_TRUE(c.request.image_buffers.empty());
  EXPECT_EQ(c.model, "x");
  EXPECT_FALSE(c.stream);
}

TEST(OpenAiRequest, SystemAndAlternatingTurnsBecomeSystemHistoryAndPrompt) {
  const ChatRequest c = parse({{"messages",
                                {{{"role", "system"}, {"content", "Be brief."}},
                                 user("first"),
                                 {{"role", "assistant"}, {"content", "one"}},
                                 user("second"),
                                 {{"role", "assistant"}, {"content", json::array({{{"type", "text"}, {"text", "two"}}})}},
                                 user("third")}}});
  ASSERT_TRUE(c.request.system.has_value());
  EXPECT_EQ(*c.request.system, "Be brief.");
  ASSERT_EQ(c.request.history.size(), 2u);
  EXPECT_EQ(c.request.history[0].user, "first");
  EXPECT_EQ(c.request.history[0].assistant, "one");
  EXPECT_EQ(c.request.history[1].user, "second");
  EXPECT_EQ(c.request.history[1].assistant, "two");
  EXPECT_EQ(c.request.prompt, "third");
}

TEST(OpenAiRequest, ImagePartsBecomePlaceholdersAtTheirPositionAndBuffersInOrder) {
  const json parts = json::array({{{"type", "image_url"}, {"image_url", {{"url", sample_data_url()}}}},
                                  {{"type", "text"}, {"text", "Compare"}},
                                  {{"type", "image_url"}, {"image_url", {{"url", sample_data_url()}, {"detail", "auto"}}}}});
  const ChatRequest c = parse({{"messages", {user(parts)}}});
  EXPECT_EQ(c.request.prompt, "<image>\nCompare\n<image>");
  ASSERT_EQ(c.request.image_buffers.size(), 2u);
  EXPECT_EQ(c.request.image_buffers[0].source(), Image::Source::kEncoded);
  EXPECT_EQ(c.request.image_buffers[0].name(), "messages[0].content[0].image_url.url");
  EXPECT_EQ(c.request.image_buffers[1].name(), "messages[0].content[2].image_url.url");
}

TEST(OpenAiRequest, OptionsAndTheEraExtensionOverrideTheServerDefaults) {
  Request defaults;
  defaults.max_new_tokens = 99;
  defaults.reduction.method = "era";
  defaults.reduction.tokens = 64;
  const ChatRequest c = parse_chat_request(
      json{{"messages", {user("q")}},
           {"max_completion_tokens", 7},
           {"temperature", 0.5},
           {"top_p", 0.9},
           {"seed", 3},
           {"stream", true},
           {"stream_options", {{"include_usage", true}}},
           {"n", 1},
           {"stop", nullptr},
           {"era", {{"method", "divprune"}, {"tokens", 32}, {"era_set", {"alpha=0.3"}}, {"ignore_eos", true}}}},
      defaults, ImageSourcePolicy());
  EXPECT_EQ(c.request.max_new_tokens, 7);
  EXPECT_FLOAT_EQ(c.request.temperature, 0.5f);
  EXPECT_FLOAT_EQ(c.request.top_p, 0.9f);
  EXPECT_EQ(c.request.seed, 3u);
  EXPECT_TRUE(c.stream);
  EXPECT_TRUE(c.include_usage);
  EXPECT_EQ(c.request.reduction.method, "divprune");
  EXPECT_EQ(c.request.reduction.tokens, 32);
  EXPECT_FLOAT_EQ(c.request.reduction.era.alpha, 0.3f);
  EXPECT_FALSE(c.request.stop_at_eos);
  // Unsaid: the defaults stay.
  const ChatRequest d = parse_chat_request(json{{"messages", {user("q")}}}, defaults, ImageSourcePolicy());
  EXPECT_EQ(d.request.max_new_tokens, 99);
  EXPECT_EQ(d.request.reduction.method, "era");
  EXPECT_EQ(d.request.reduction.tokens, 64);
  EXPECT_TRUE(d.request.stop_at_eos);
}

TEST(OpenAiRequest, BadFieldsAreRefusedNamingTheField) {
  const json ok_user = user("q");
  expect_refused({{"messages", {ok_user}}, {"temperature", "hot"}}, 400, "temperature");
  expect_refused({{"messages", {ok_user}}, {"temperature", -1}}, 400, "temperature");
  expect_refused({{"messages", {ok_user}}, {"top_p", 0}}, 400, "top_p");
  expect_refused({{"messages", {ok_user}}, {"max_tokens", 3.5}}, 400, "max_tokens");
  expect_refused({{"messages", {ok_user}}, {"max_tokens", -1}}, 400, "max_tokens");
  expect_refused({{"messages", {ok_user}}, {"max_tokens", 5}, {"max_completion_tokens", 6}}, 400, "max_completion_tokens");
  expect_refused({{"messages", {ok_user}}, {"n", 2}}, 400, "n");
  expect_refused({{"messages", {ok_user}}, {"stop", "\n"}}, 400, "stop");
  expect_refused({{"messages", {ok_user}}, {"tools", json::array({json::object()})}}, 400, "tools");
  expect_refused({{"messages", {ok_user}}, {"stream", "yes"}}, 400, "stream");
  expect_refused({{"messages", {ok_user}}, {"era", {{"method", "nonsense"}}}}, 400, "era.method");
  expect_refused({{"messages", {ok_user}}, {"era", {{"tokens", "many"}}}}, 400, "era.tokens");
  expect_refused({{"messages", {ok_user}}, {"era", {{"era_set", {"alpha=0.3", "nope=1"}}}}}, 400, "era.era_set[1]");
  expect_refused({{"messages", {ok_user}}, {"era", {{"method_set", {7}}}}}, 400, "era.method_set[0]");
  expect_refused({{"messages", {ok_user}}, {"era", {{"colour", "red"}}}}, 400, "era.colour");
  expect_refused({{"messages", "hi"}}, 400, "messages");
  expect_refused(json::object(), 400, "messages");
  expect_refused({{"messages", json::array()}}, 400, "messages");
  expect_refused({{"messages", {{{"content", "q"}}}}}, 400, "messages[0].role");
  expect_refused({{"messages", {{{"role", "tool"}, {"content", "q"}}}}}, 400, "messages[0].role");
  expect_refused({{"messages", {{{"role", "user"}, {"content", 5}}}}}, 400, "messages[0].content");
  expect_refused({{"messages", {user(json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "audio"}}}))}}}, 400,
                 "messages[0].content[1].type");
  expect_refused({{"messages", {user(json::array({{{"type", "text"}, {"text", 3}}}))}}}, 400, "messages[0].content[0].text");
  expect_refused({{"messages", {user(json::array({{{"type", "image_url"}, {"image_url", {{"url", 1}}}}}))}}}, 400,
                 "messages[0].content[0].image_url.url");
  // Alternation: user first, user last, no two of a kind in a row, system only in front.
  expect_refused({{"messages", {{{"role", "assistant"}, {"content", "a"}}, ok_user}}}, 400, "messages[0].role");
  expect_refused({{"messages", {ok_user, ok_user}}}, 400, "messages[1].role");
  expect_refused({{"messages", {ok_user, {{"role", "assistant"}, {"content", "a"}}}}}, 400, "messages[1].role");
  expect_refused({{"messages", {ok_user, {{"role", "system"}, {"content", "s"}}}}}, 400, "messages[1].role");
}

TEST(OpenAiRequest, ModelDependentChecksUseTheLoadedModel) {
  ModelInfo model;
  model.max_context = 100;
  const json body = {{"messages", {user("q")}}, {"max_tokens", 100}};
  EXPECT_EQ(parse(body).request.max_new_tokens, 100);  // no model: only the fixed bounds
  try {
    parse_chat_request(body, Request{}, ImageSourcePolicy(), &model);
    FAIL() << "max_tokens at the context accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
}

TEST(OpenAiRequest, ImageSourcesAreCheckedNamingTheField) {
  const auto with_url = [](const std::string& url) {
    return json{
        {"messages",
         {user("first"),
          {{"role", "assistant"}, {"content", "a"}},
          user(json::array({{{"type", "text"}, {"text", "see"}}, {{"type", "image_url"}, {"image_url", {{"url", url}}}}}))}}};
  };
  const std::string field = "messages[2].content[1].image_url.url";
  expect_refused(with_url("https://example.com/cat.png"), 403, field);
  expect_refused(with_url("http://127.0.0.1/cat.png"), 403, field);
  expect_refused(with_url("ftp://host/cat.png"), 400, field);
  expect_refused(with_url("cat.png"), 400, field);
  expect_refused(with_url("data:image/png;base64,@@@not-base64@@@"), 400, field);
  expect_refused(with_url("data:text/plain;base64,aGVsbG8="), 400, field);
  expect_refused(with_url("data:image/png,rawbytes"), 400, field);
  // Local files: refused with no --allow-dir, and outside the allowed folders however spelled.
  expect_refused(with_url(sample_png()), 403, field);
  const std::string allowed = test::scratch_dir("server_allowed");
  const std::string outside = test::scratch_dir("server_outside");
  fs::copy_file(sample_png(), allowed + "/in.png");
  fs::copy_file(sample_png(), outside + "/out.png");
  fs::create_symlink(outside + "/out.png", allowed + "/link.png");
  const ImageSourcePolicy policy({allowed});
  expect_refused(with_url(outside + "/out.png"), 403, field, policy);
  expect_refused(with_url(allowed + "/../server_outside/out.png"), 403, field, policy);
  expect_refused(with_url(allowed + "/link.png"), 403, field, policy);
  expect_refused(with_url("file://" + outside + "/out.png"), 403, field, policy);
  expect_refused(with_url("/etc/passwd"), 403, field, policy);
  expect_refused(with_url(allowed + "/missing.png"), 400, field, policy);
  expect_refused(with_url(allowed), 400, field, policy);  // a folder, not a file
  // Inside: read now, as encoded bytes.
  const ChatRequest c = parse(with_url("file://" + allowed + "/in.png"), policy);
  ASSERT_EQ(c.request.image_buffers.size(), 1u);
  EXPECT_EQ(c.request.image_buffers[0].source(), Image::Source::kEncoded);
  EXPECT_EQ(parse(with_url(allowed + "/in.png"), policy).request.image_buffers.size(), 1u);
  EXPECT_THROW(ImageSourcePolicy({allowed + "/nope"}), Error);
}

TEST(OpenAiRequest, DataUrlsDecodeWithPadding) {
  EXPECT_EQ(decode_data_url("data:image/png;base64,aGVsbG8=", "f"), "hello");
  EXPECT_EQ(decode_data_url("DATA:image/jpeg;BASE64,aGk=", "f"), "hi");
  EXPECT_EQ(decode_data_url(sample_data_url(), "f"), test::read_file(sample_png()));
  EXPECT_THROW(decode_data_url("data:image/png;base64,", "f"), ApiError);
}

TEST(OpenAiRequest, MalformedOrTooDeepJsonIsA400) {
  for (const std::string& body : {std::string("{bad"), std::string(""), std::string(200, '[') + std::string(200, ']')}) {
    try {
      parse_chat_request(body, Request{}, ImageSourcePolicy());
      FAIL() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(error_body(e)["error"]["type"], "invalid_request_error");
    }
  }
  try {
    parse_chat_request(std::string("[1]"), Request{}, ImageSourcePolicy());
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("must be a JSON object"), std::string::npos);
  }
}

// A number no double holds (1e400) is valid JSON that nlohmann's parser refuses with its own
// out_of_range error: it must be a 400 naming the field, like any other bad value, not a 500.
TEST(OpenAiRequest, NumbersBeyondADoubleAreA400NamingTheField) {
  const std::string user_q = R"({"role":"user","content":"q"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"messages":[)" + user_q + R"(],"temperature":1e400})", "temperature"},
      {R"({"temperature":-1e400,"messages":[)" + user_q + "]}", "temperature"},
      {R"({"messages":[)" + user_q + R"(],"era":{"method":"era","keep_ratio":1E+999}})", "era.keep_ratio"},
      {R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":2e308}]}]})",
       "messages[0].content[1].text"},
      {R"({"messages":[)" + user_q + R"(],"era":{"era_set":["alpha=0.3",[1,[2,9e9999]]]}})", "era.era_set[1][1][1]"},
  };
  for (const auto& [body, field] : cases) {
    try {
      parse_chat_request(body, Request{}, ImageSourcePolicy());
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body << ": " << e.what();
      EXPECT_EQ(e.param(), field) << body << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(field + ": "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("range of a double"), std::string::npos) << e.what();
    }
  }
  try {  // a bare number: no field to name, still the client's fault
    parse_chat_request(std::string("1e400"), Request{}, ImageSourcePolicy());
    ADD_FAILURE() << "accepted 1e400";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
  }
}

// An unsigned JSON integer above the largest int64_t: refused with the value as sent. The check
// for "seed" (bound: the largest int64_t) used to compute bound + 1, a signed overflow.
TEST(OpenAiRequest, IntegersAboveInt64AreRefusedAsSent) {
  for (const char* key : {"seed", "max_tokens", "n"}) {
    try {
      parse(json{{"messages", {user("q")}}, {key, std::numeric_limits<uint64_t>::max()}});
      ADD_FAILURE() << key << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << e.what();
      EXPECT_EQ(e.param(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find("got 18446744073709551615"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace era::server
