#pragma once
// One chat generation between the queue's worker (which runs Session::generate) and the HTTP
// thread that answers the client: the worker pushes text pieces and then the result or an error;
// the HTTP thread takes them as they come (streaming) or waits for the end. When the client
// goes away the HTTP thread cancels, and the next on_text returns false, so the model stops
// computing tokens nobody will read.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "apps/server/api_error.h"
#include "era/era.h"

namespace era::server {

class Generation {
 public:
  using Clock = std::chrono::steady_clock;
  Generation(Request request, Clock::time_point deadline) : request_(std::move(request)), deadline_(deadline) {}

  // Worker side: runs the request on `session`, feeding pieces to the reader, and ends with the
  // result or an error (never throws). A request whose deadline passed while it waited in the
  // queue is not run (503); one that reaches it while generating stops (finish "timeout").
  void run(Session& session);

  // Reader side. Waits until there is text, the end, or `wait` passes; moves the text gathered so
  // far into `text`. Returns true once the generation has ended (result() or error() is set).
  bool wait(std::string& text, std::chrono::milliseconds wait);
  void cancel();  // the client is gone: stop at the next piece

  const Request& request() const { return request_; }
  const std::optional<Result>& result() const { return result_; }  // after the end
  const std::optional<ApiError>& error() const { return error_; }  // after the end
  bool timed_out() const { return timed_out_; }

 private:
  bool on_text(const std::string& delta);

  Request request_;
  const Clock::time_point deadline_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string pending_text_;
  bool ended_ = false, cancelled_ = false, timed_out_ = false;
  std::optional<Result> result_;
  std::optional<ApiError> error_;
};

}  // namespace era::server
