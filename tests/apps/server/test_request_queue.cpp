// The bounded queue: jobs run one at a time in order, and pushes beyond the capacity are refused
// while the worker is busy.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <vector>

#include "apps/server/request_queue.h"

namespace era::server {
namespace {

TEST(RequestQueue, RefusesBeyondCapacityAndRunsInOrder) {
  RequestQueue queue(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  std::mutex mutex;
  std::vector<int> order;
  ASSERT_TRUE(queue.try_push([&] {
    started.set_value();
    released.wait();
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(0);
  }));
  started.get_future().wait();  // the worker holds job 0: the queue itself is empty
  EXPECT_TRUE(queue.busy());
  EXPECT_EQ(queue.pending(), 0u);
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(queue.try_push([&, i] {
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(i);
    }));
  }
  EXPECT_EQ(queue.pending(), 2u);
  EXPECT_FALSE(queue.try_push([] {}));  // full: 2 waiting
  release.set_value();
  queue.stop();  // runs what was queued, then joins
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(queue.try_push([] {}));  // stopped
}

TEST(RequestQueue, AThrowingJobDoesNotStopTheWorker) {
  RequestQueue queue(4);
  bool ran = false;
  ASSERT_TRUE(queue.try_push([] { throw std::runtime_error("boom"); }));
  ASSERT_TRUE(queue.try_push([&] { ran = true; }));
  queue.stop();
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace era::server
