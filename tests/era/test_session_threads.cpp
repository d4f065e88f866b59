// One Session, many threads: calls are serialised, so every answer equals the single-threaded
// one; cancelling stops within one token; errors never escape as anything but era::Error (or the
// callback's own exception).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include "bundle_session.h"
#include "era/era.h"
#include "test_support.h"

namespace era {
namespace {

std::string strip(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\n\r");
  return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(" \t\n\r") - first + 1);
}

std::vector<Request> mixed_requests() {
  const std::vector<std::string> prompts{"What is shown in this image?", "Describe the colours.", "Is there a house?",
                                         "Count the trees."};
  const std::vector<std::pair<std::string, int64_t>> methods{{"full", 0}, {"era", 16}, {"era:dep", 32}, {"era", 64}};
  std::vector<Request> out;
  for (size_t i = 0; i < 8; ++i) {
    Request r;
    r.images = {test::source_dir() + (i % 3 == 1 ? "/tests/data/sample.jpg" : "/tests/data/sample.png")};
    r.prompt = prompts[i % prompts.size()];
    r.reduction.method = methods[i % methods.size()].first;
    r.reduction.tokens = methods[i % methods.size()].second;
    r.max_new_tokens = 6 + static_cast<int64_t>(i);
    r.stop_at_eos = false;
    if (i == 5) {
      r.temperature = 0.8f;  // sampled: its own seed makes it repeatable
      r.seed = 7;
    }
    out.push_back(r);
  }
  return out;
}

TEST(SessionThreads, FourThreadsGetTheSingleThreadedAnswers) {
  const auto requests = mixed_requests();
  std::vector<Result> alone;
  for (const auto& r : requests) alone.push_back(test::bundle_session().generate(r));

  std::vector<Result> threaded(requests.size() * 2);  // every request twice, in both halves
  std::atomic<size_t> next{0};
  std::vector<std::string> failures(4);
  std::mutex log_mutex;
  std::vector<size_t> piece_log;  // which call streamed each piece, in the order they arrived
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (size_t i; (i = next++) < threaded.size();) {
          Request r = requests[i % requests.size()];
          std::string streamed;
          r.on_text = [&, i](const std::string& piece) {
            streamed += piece;
            std::lock_guard<std::mutex> lock(log_mutex);
            piece_log.push_back(i);
            return true;
          };
          threaded[i] = test::bundle_session().generate(r);
          if (strip(streamed) != threaded[i].text) failures[t] += "streamed '" + streamed + "' is not the answer; ";
          if (i % 4 == 0) test::bundle_session().info();  // other calls interleave too
        }
      } catch (const std::exception& e) {
        failures[t] += e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& f : failures) EXPECT_EQ(f, "");
  // Serialised calls: each call's pieces arrive in one uninterrupted run. (With the tiny model the
  // calls rarely overlap even unlocked; ACallWaitsForTheRunningOne forces the overlap.)
  std::vector<bool> finished(threaded.size(), false);
  for (size_t k = 0; k < piece_log.size(); ++k) {
    ASSERT_FALSE(finished[piece_log[k]]) << "call " << piece_log[k] << " streamed again after another call's pieces";
    if (k > 0 && piece_log[k - 1] != piece_log[k]) finished[piece_log[k - 1]] = true;
  }
  for (size_t i = 0; i < threaded.size(); ++i) {
    const auto& want = alone[i % requests.size()];
    EXPECT_EQ(threaded[i].tokens, want.tokens) << "request " << i;
    EXPECT_EQ(threaded[i].text, want.text) << "request " << i;
    EXPECT_EQ(threaded[i].stats.visual_tokens, want.stats.visual_tokens) << "request " << i;
  }
}

// A call that is slow inside its callback holds the Session: a call made meanwhile from another
// thread waits, and streams nothing until the first has finished.
TEST(SessionThreads, ACallWaitsForTheRunningOne) {
  std::mutex log_mutex;
  std::vector<char> log;
  std::atomic<bool> first_streaming{false};
  auto logger = [&](char who, bool slow) {
    return [&, who, slow](const std::string&) {
      {
        std::lock_guard<std::mutex> lock(log_mutex);
        log.push_back(who);
      }
      if (slow && !first_streaming.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return true;
    };
  };
  Request a = mixed_requests()[0], b = mixed_requests()[1];
  a.on_text = logger('a', true);
  b.on_text = logger('b', false);
  std::thread first([&] { test::bundle_session().generate(a); });
  while (!first_streaming) std::this_thread::yield();
  test::bundle_session().generate(b);  // starts while `a` sleeps in its callback
  first.join();
  const std::string order(log.begin(), log.end());
  ASSERT_NE(order.find('b'), std::string::npos);
  EXPECT_EQ(order.find('a', order.find('b')), std::string::npos) << order;  // no 'a' after the first 'b'
}

// generate_batch from one thread while others call generate: still the single-threaded answers.
TEST(SessionThreads, BatchAndSingleCallsInterleave) {
  const auto requests = mixed_requests();
  std::vector<Request> batch(requests.begin(), requests.begin() + 4);
  for (auto& r : batch) r.reduction = requests[1].reduction;  // one LAR setting: one real batch
  std::vector<Result> alone;
  for (const auto& r : batch) alone.push_back(test::bundle_session().generate(r));
  std::vector<Result> batched, single(batch.size());
  std::thread batcher([&] { batched = test::bundle_session().generate_batch(batch); });
  std::thread singles([&] {
    for (size_t i = 0; i < batch.size(); ++i) single[i] = test::bundle_session().generate(batch[i]);
  });
  batcher.join();
  singles.join();
  ASSERT_EQ(batched.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << i;
    EXPECT_EQ(single[i].tokens, alone[i].tokens) << i;
  }
}

// on_text returning false after the first piece: the generation stops right there, with exactly
// the tokens streamed so far, while other threads keep using the Session.
TEST(SessionThreads, CancelStopsWithinOneToken) {
  auto r = mixed_requests()[0];
  r.max_new_tokens = 40;
  const Result uncut = test::bundle_session().generate(r);
  ASSERT_EQ(uncut.tokens.size(), 40u);

  std::thread other([&] { test::bundle_session().generate(mixed_requests()[1]); });
  std::string streamed;
  int calls = 0;
  r.on_text = [&](const std::string& piece) {
    streamed += piece;
    ++calls;
    return false;
  };
  const Result cut = test::bundle_session().generate(r);
  other.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cut.finish_reason, "cancelled");
  EXPECT_GE(cut.tokens.size(), 1u);
  EXPECT_LT(cut.tokens.size(), 40u);
  EXPECT_EQ(cut.stats.generated_tokens, static_cast<int64_t>(cut.tokens.size()));
  // No token was computed after the one whose piece was refused: no decode step fed it back.
  EXPECT_EQ(cut.stats.decode_step_ms.size() + 1, cut.tokens.size());
  // ... and the tokens are the uncut answer's prefix, spelling what was streamed.
  EXPECT_TRUE(std::equal(cut.tokens.begin(), cut.tokens.end(), uncut.tokens.begin()));
  EXPECT_EQ(cut.text, strip(streamed));
}

struct NotAStdException {
  int value;
};

// What the callback throws comes back unchanged (not wrapped), and the Session stays usable.
TEST(SessionThreads, CallbackExceptionsPassThroughUnchanged) {
  auto r = mixed_requests()[0];
  r.on_text = [](const std::string&) -> bool { throw std::logic_error("from the app"); };
  EXPECT_THROW(
      {
        try {
          test::bundle_session().generate(r);
        } catch (const Error&) {
          ADD_FAILURE() << "wrapped as era::Error";
          throw std::logic_error("wrapped");
        }
      },
      std::logic_error);
  r.on_text = [](const std::string&) -> bool { throw NotAStdException{42}; };
  try {
    test::bundle_session().generate(r);
    FAIL() << "the callback's exception must propagate";
  } catch (const NotAStdException& e) {
    EXPECT_EQ(e.value, 42);
  }
  r.on_text = nullptr;
  EXPECT_EQ(test::bundle_session().generate(r).tokens, test::bundle_session().generate(mixed_requests()[0]).tokens);
}

TEST(SessionApi, MovedFromSessionThrowsInsteadOfCrashing) {
  Session a = Session::open(test::bundle_dir());
  Session b = std::move(a);
  for (const auto& call : std::vector<std::function<void()>>{[&] { a.generate(mixed_requests()[0]); }, [&] { a.info(); },
                                                             [&] { a.prepare(mixed_requests()[0]); },
                                                             [&] { a.generate_batch({mixed_requests()[0]}); }}) {
    try {
      call();
      ADD_FAILURE() << "a moved-from Session must refuse calls";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
  EXPECT_GT(b.info().max_context, 0);
}

TEST(SessionApi, InfoNamesTheLoadedShim) {
  const std::string shim = test::bundle_session().info().tokenizer_shim;
  EXPECT_NE(shim.find("libera_sentencepiece.so"), std::string::npos) << shim;
  EXPECT_TRUE(std::ifstream(shim).good()) << shim;
}

// The version macros and era::version() come from project(era VERSION ...) in CMakeLists.txt.
TEST(SessionApi, VersionComesFromTheProject) {
  const std::string cmake = test::read_file(test::source_dir() + "/CMakeLists.txt");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(cmake, m, std::regex(R"(project\(era VERSION (\d+)\.(\d+)\.(\d+))")));
  EXPECT_EQ(ERA_VERSION_MAJOR, std::stoi(m[1]));
  EXPECT_EQ(ERA_VERSION_MINOR, std::stoi(m[2]));
  EXPECT_EQ(ERA_VERSION_PATCH, std::stoi(m[3]));
  const Version v = version();
  EXPECT_EQ(v.major, ERA_VERSION_MAJOR);
  EXPECT_EQ(v.minor, ERA_VERSION_MINOR);
  EXPECT_EQ(v.patch, ERA_VERSION_PATCH);
  EXPECT_EQ(std::string(version_string()), std::string(m[1]) + "." + std::string(m[2]) + "." + std::string(m[3]));
  EXPECT_EQ(ERA_VERSION, v.major * 10000 + v.minor * 100 + v.patch);
}

}  // namespace
}  // namespace era
