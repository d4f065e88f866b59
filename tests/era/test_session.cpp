// The public API: one loaded session answering several requests, streaming and cancelling.
#include <gtest/gtest.h>

#include <algorithm>

#include "bundle_session.h"
#include "era/debug.h"
#include "era/era.h"
#include "test_support.h"
#include "util/npy.h"

namespace era {
namespace {

Request sample_request(int64_t max_new_tokens) {
  Request r;
  r.images = {test::source_dir() + "/tests/data/sample.png"};
  r.prompt = "What is shown in this image?";
  r.max_new_tokens = max_new_tokens;
  r.stop_at_eos = false;
  return r;
}

TEST(Session, RepeatedRequestsGiveTheSameAnswer) {
  const auto a = test::bundle_session().generate(sample_request(16));
  const auto b = test::bundle_session().generate(sample_request(16));
  EXPECT_EQ(a.tokens.size(), 16u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.stats.visual_tokens, 576);
  EXPECT_EQ(a.stats.prompt_tokens, a.stats.visual_tokens + a.stats.text_tokens);
  EXPECT_EQ(a.stats.generated_tokens, 16);
  EXPECT_EQ(a.stats.decode_step_ms.size(), 15u);
  EXPECT_GT(a.stats.kv_cache_bytes, 0);
  EXPECT_LE(a.stats.kv_cache_bytes, a.stats.kv_cache_allocated_bytes);
}

TEST(Session, StreamedPiecesAddUpToTheAnswer) {
  auto req = sample_request(20);
  std::string streamed;
  int calls = 0;
  req.on_text = [&](const std::string& delta) {
    streamed += delta;
    ++calls;
    return true;
  };
  const auto r = test::bundle_session().generate(req);
  EXPECT_GT(calls, 1);
  // The result is the stream with surrounding whitespace stripped.
  const auto first = streamed.find_first_not_of(" \t\n\r\f\v");
  const auto last = streamed.find_last_not_of(" \t\n\r\f\v");
  EXPECT_EQ(r.text, first == std::string::npos ? "" : streamed.substr(first, last - first + 1));
}

TEST(Session, CallbackCancelsWithinOneToken) {
  auto req = sample_request(50);
  int calls = 0;
  req.on_text = [&](const std::string&) { return ++calls < 2; };
  const auto r = test::bundle_session().generate(req);
  EXPECT_EQ(r.finish_reason, "cancelled");
  EXPECT_EQ(calls, 2);
  EXPECT_LT(r.tokens.size(), 50u);
  EXPECT_EQ(r.stats.decode_step_ms.size() + 1, r.tokens.size());  // no decode step after the cancel
}

TEST(Session, PrepareGivesThePillowPixelsAndTheReferenceIds) {
  const auto in = debug::prepare(test::bundle_session(), sample_request(1));
  EXPECT_TRUE(torch::equal(in.pixel_values, read_npy(test::testdata_dir() + "/logits/pixel_values.npy")));
  EXPECT_EQ(std::count(in.token_ids.begin(), in.token_ids.end(), in.image_token_id), 1);
}

TEST(Session, ZeroNewTokensAndTextOnlyRequests) {
  auto req = sample_request(0);
  EXPECT_TRUE(test::bundle_session().generate(req).tokens.empty());
  Request text_only;
  text_only.prompt = "Hello there";
  text_only.max_new_tokens = 3;
  text_only.stop_at_eos = false;
  const auto r = test::bundle_session().generate(text_only);
  EXPECT_EQ(r.stats.visual_tokens, 0);
  EXPECT_EQ(r.tokens.size(), 3u);
}

// A conversation: the earlier turns are in the prompt the model sees (their </s> as the EOS id),
// the image stays with the turn it came in, a system text replaces the template's, and the
// answer equals the one for the same prompt written out by hand without the template.
TEST(Session, ConversationHistoryAndSystemReachTheModel) {
  Request chat = sample_request(8);
  chat.history = {{"What is shown in this image?", "A square."}};
  chat.prompt = "Which colour is it?";
  chat.system = "Be brief.";
  const PreparedInput in = test::bundle_session().prepare(chat);
  const std::string expected =
      "Be brief. USER: <image>\nWhat is shown in this image? ASSISTANT: A square.</s>"
      "USER: Which colour is it? ASSISTANT:";
  EXPECT_EQ(in.prompt, expected);
  EXPECT_EQ(std::count(in.token_ids.begin(), in.token_ids.end(), int64_t{2}), 1) << "the finished turn ends with one EOS id";
  Request raw = sample_request(8);
  raw.use_template = false;
  raw.prompt = expected;
  EXPECT_EQ(test::bundle_session().prepare(raw).token_ids, in.token_ids);
  EXPECT_EQ(test::bundle_session().generate(chat).tokens, test::bundle_session().generate(raw).tokens);

  raw.history = chat.history;  // a conversation needs the template to lay it out
  try {
    test::bundle_session().generate(raw);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("needs use_template"), std::string::npos) << e.what();
  }
}

TEST(Session, InfoDescribesTheBundle) {
  const auto info = test::bundle_session().info();
  EXPECT_EQ(info.arch, "llava-1.5");
  EXPECT_EQ(info.visual_tokens_per_image, 576);
  EXPECT_EQ(info.device, "cpu");
  EXPECT_GT(info.max_context, 576);
}

TEST(Session, BadRequestsThrowEraErrors) {
  auto req = sample_request(4);
  req.top_p = 0.0f;
  EXPECT_THROW(test::bundle_session().generate(req), Error);
  req = sample_request(4);
  req.images.push_back("/no/such.png");  // a second image: its placeholder is added, loading fails
  try {
    test::bundle_session().generate(req);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kImage);
    EXPECT_NE(std::string(e.what()).find("/no/such.png"), std::string::npos) << e.what();
  }
  // The session still works after a failed request.
  EXPECT_EQ(test::bundle_session().generate(sample_request(2)).tokens.size(), 2u);
}

TEST(Session, BfloatRunsOnCpu) {
  SessionOptions o;
  o.dtype = "bfloat16";
  auto s = Session::open(test::bundle_dir(), o);
  const auto r = s.generate(sample_request(4));
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(s.info().dtype, "bfloat16");
}

// float16 either runs (LibTorch builds with CPU half kernels) or is refused when the session
// opens, with a message naming the dtype: never a TorchScript failure in the middle of a request.
TEST(Session, HalfOnCpuRunsOrIsRefusedAtOpen) {
  SessionOptions o;
  o.dtype = "float16";
  try {
    auto s = Session::open(test::bundle_dir(), o);
    EXPECT_EQ(s.generate(sample_request(2)).tokens.size(), 2u);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("dtype float16 is not supported on cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace era

namespace era {
namespace {

// Left-padded batches answer exactly what each request gets alone.
TEST(SessionBatch, EqualsOneByOne) {
  for (const std::string method : {"full", "era"}) {
    std::vector<Request> batch;
    const std::vector<std::string> prompts{"What is shown in this image?", "Describe the colours.", "Is there a house?",
                                           "Count the trees in this picture, please, and explain how you counted."};
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r = sample_request(6 + 2 * static_cast<int64_t>(i));  // different lengths too
      r.prompt = prompts[i];
      if (i == 1) r.images = {test::source_dir() + "/tests/data/sample.jpg"};
      if (i == 2) r.images.clear();  // a text-only request in the batch
      r.reduction.method = method;
      r.reduction.tokens = 64;
      batch.push_back(r);
    }
    const auto together = test::bundle_session().generate_batch(batch);
    ASSERT_EQ(together.size(), batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto alone = test::bundle_session().generate(batch[i]);
      EXPECT_EQ(together[i].tokens, alone.tokens) << method << " request " << i;
      EXPECT_EQ(together[i].text, alone.text) << method << " request " << i;
      EXPECT_EQ(together[i].stats.visual_tokens, alone.stats.visual_tokens);
      EXPECT_EQ(together[i].finish_reason, alone.finish_reason);
    }
  }
}

TEST(SessionBatch, StopsEachRowAtItsOwnLimitAndSamplesWithItsOwnSeed) {
  std::vector<Request> batch{sample_request(3), sample_request(9)};
  batch[1].temperature = 1.0f;
  batch[1].seed = 5;
  const auto together = test::bundle_session().generate_batch(batch);
  EXPECT_EQ(together[0].tokens.size(), 3u);
  EXPECT_EQ(together[1].tokens.size(), 9u);
  EXPECT_EQ(together[1].tokens, test::bundle_session().generate(batch[1]).tokens);
}

}  // namespace
}  // namespace era
