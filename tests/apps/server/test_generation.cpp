// One generation between the queue's worker and the HTTP thread: the --timeout-s deadline (in the
// queue: 503 without running; while generating: stopped, flagged timed out), and a client that
// leaves (before the start: 499 without running; while generating: stopped at the next piece).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "apps/server/generation.h"
#include "bundle_session.h"
#include "era/era.h"
#include "test_support.h"

namespace era::server {
namespace {

using namespace std::chrono_literals;

// Long enough that no machine finishes it inside the short deadlines below.
Request long_request() {
  Request r;
  r.images = {test::source_dir() + "/tests/data/sample.png"};
  r.prompt = "Describe the image.";
  r.max_new_tokens = test::bundle_session().info().max_context - 700;
  r.stop_at_eos = false;
  return r;
}

TEST(Generation, ADeadlinePassedInTheQueueIsRefusedWithoutRunning) {
  Generation g(long_request(), Generation::Clock::now() - 1ms);
  g.run(test::bundle_session());
  std::string text;
  ASSERT_TRUE(g.wait(text, 0ms));
  ASSERT_TRUE(g.error().has_value());
  EXPECT_EQ(g.error()->status(), 503);
  EXPECT_EQ(g.error()->code(), "queue_timeout");
  EXPECT_NE(std::string(g.error()->what()).find("--timeout-s"), std::string::npos);
  EXPECT_FALSE(g.result().has_value());
  EXPECT_TRUE(text.empty());
}

TEST(Generation, ADeadlineReachedWhileGeneratingStopsItAndFlagsTheTimeout) {
  const Request request = long_request();
  ASSERT_GT(request.max_new_tokens, 200);
  Generation g(request, Generation::Clock::now() + 400ms);
  g.run(test::bundle_session());
  std::string text;
  ASSERT_TRUE(g.wait(text, 0ms));
  ASSERT_FALSE(g.error().has_value()) << g.error()->what();
  ASSERT_TRUE(g.result().has_value());
  EXPECT_TRUE(g.timed_out());
  EXPECT_EQ(g.result()->finish_reason, "cancelled");
  EXPECT_LT(static_cast<int64_t>(g.result()->tokens.size()), request.max_new_tokens);
}

TEST(Generation, AClientGoneBeforeTheStartIsNotRun) {
  Generation g(long_request(), Generation::Clock::now() + 60s);
  g.cancel();
  g.run(test::bundle_session());
  ASSERT_TRUE(g.error().has_value());
  EXPECT_EQ(g.error()->status(), 499);
  EXPECT_FALSE(g.timed_out());
}

TEST(Generation, AClientGoneWhileGeneratingStopsItAndTheReaderSeesTheTextSoFar) {
  const Request request = long_request();
  Generation g(request, Generation::Clock::now() + 600s);
  std::thread worker([&] { g.run(test::bundle_session()); });
  std::string text;
  bool ended = false;
  while (text.empty() && !ended) ended = g.wait(text, 100ms);  // the first pieces streamed
  g.cancel();
  while (!ended) ended = g.wait(text, 100ms);
  worker.join();
  ASSERT_TRUE(g.result().has_value());
  EXPECT_FALSE(g.timed_out());
  EXPECT_EQ(g.result()->finish_reason, "cancelled");
  EXPECT_LT(static_cast<int64_t>(g.result()->tokens.size()), request.max_new_tokens);
  EXPECT_FALSE(text.empty());
}

}  // namespace
}  // namespace era::server
