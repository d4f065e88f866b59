#pragma once
// The bounded queue of pending generations and the one worker thread that runs them in order.
// A Session runs one call at a time anyway; one worker keeps that order explicit (first come,
// first served) and lets the server refuse work beyond --queue at once (HTTP 503) instead of
// piling up blocked HTTP threads.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace era::server {

class RequestQueue {
 public:
  // `capacity`: jobs that may wait while one runs (>= 1).
  explicit RequestQueue(size_t capacity);
  ~RequestQueue();
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  // Queues `job` unless `capacity` jobs already wait or the queue is stopping: false then. The
  // job runs on the worker thread; it must not throw (an exception is caught and dropped).
  bool try_push(std::function<void()> job);

  size_t pending() const;  // jobs waiting, the running one not counted
  bool busy() const;       // a job is running
  size_t capacity() const { return capacity_; }

  // Refuses new jobs, runs the ones already queued, joins the worker. Idempotent.
  void stop();

 private:
  void run();

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  bool running_job_ = false;
  std::thread worker_;
};

}  // namespace era::server
