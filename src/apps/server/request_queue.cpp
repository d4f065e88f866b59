#include "apps/server/request_queue.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace era::server {

RequestQueue::RequestQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity), worker_([this] { run(); }) {}

RequestQueue::~RequestQueue() { stop(); }

bool RequestQueue::try_push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || jobs_.size() >= capacity_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

size_t RequestQueue::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_.size();
}

bool RequestQueue::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_job_;
}

void RequestQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

void RequestQueue::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and everything queued has run
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_job_ = true;
    }
    try {
      job();
    } catch (const std::exception& e) {
      spdlog::error("era_server: a queued job threw: {}", e.what());
    } catch (...) {
      spdlog::error("era_server: a queued job threw a non-standard exception");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    running_job_ = false;
  }
}

}  // namespace era::server
