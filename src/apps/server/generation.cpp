#include "apps/server/generation.h"

#include <exception>

namespace era::server {

bool Generation::on_text(const std::string& delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_) return false;
  if (Clock::now() >= deadline_) {
    timed_out_ = true;
    return false;
  }
  pending_text_ += delta;
  changed_.notify_all();
  return true;
}

void Generation::run(Session& session) {
  std::optional<Result> result;
  std::optional<ApiError> error;
  bool skip = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) skip = true;  // the client left while this waited in the queue
  }
  if (skip) {
    error = ApiError(499, "the client went away before the generation started");
  } else if (Clock::now() >= deadline_) {
    error = ApiError(503, "the request waited in the queue past --timeout-s; try again later", "", "", "queue_timeout");
  } else {
    Request request = request_;
    request.on_text = [this](const std::string& delta) { return on_text(delta); };
    try {
      result = session.generate(request);
    } catch (const Error& e) {
      error = api_error_from(e);
    } catch (const std::exception& e) {
      error = ApiError(500, std::string("internal error: ") + e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  result_ = std::move(result);
  error_ = std::move(error);
  ended_ = true;
  changed_.notify_all();
}

bool Generation::wait(std::string& text, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, wait, [&] { return ended_ || !pending_text_.empty(); });
  text += pending_text_;
  pending_text_.clear();
  return ended_;
}

void Generation::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
}

}  // namespace era::server
