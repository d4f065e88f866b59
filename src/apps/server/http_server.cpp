#include "apps/server/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "apps/server/sse.h"

namespace era::server {
namespace {

using Clock = ConnectionStream::Clock;

// Set while a connection is handed to process_and_close_socket on the accepting thread because
// no connection thread is free: it is answered 503 at once, nothing read.
thread_local bool t_no_thread_free = false;

// A thread per connection, up to `max`, kept for the next connection when its own ends. Not
// httplib's fixed ThreadPool: there a connection beyond the pool waits in an unbounded queue
// until some other connection ends, so a few idle or trickling clients hold every other client
// (GET /health included) off for their whole timeout. Here a connection never waits for a
// thread: it has one, or it is refused (503) on the spot.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max) : max_(std::max<size_t>(max, 1)) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stopping_ && idle_ > 0) {
        --idle_;  // reserved: the job pushed now is that thread's
        jobs_.push_back(std::move(fn));
        wake_.notify_one();
        return;
      }
      if (!stopping_ && threads_.size() < max_) {
        threads_.emplace_back([this, job = std::move(fn)]() mutable { work(std::move(job)); });
        return;
      }
    }
    t_no_thread_free = true;
    fn();
    t_no_thread_free = false;
  }

  // Lets the connections in progress finish (their own timeouts bound them), then joins.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

 private:
  void work(std::function<void()> job) {
    for (;;) {
      try {
        job();
      } catch (const std::exception& e) {
        spdlog::error("era_server: a connection failed: {}", e.what());
      } catch (...) {
        spdlog::error("era_server: a connection failed with a non-standard exception");
      }
      job = nullptr;
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_;
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) {
        --idle_;
        return;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
  }

  const size_t max_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;  // touched by the accepting thread only
  size_t idle_ = 0;
  bool stopping_ = false;
};

// At most one warning a second about refused connections: a flood must not flood the log too.
void warn_refused(const std::string& what) {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  int64_t last = last_ms.load();
  if (now_ms - last < 1000 || !last_ms.compare_exchange_strong(last, now_ms)) return;
  spdlog::warn("era_server: {}", what);
}

std::string lower_trimmed(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  std::string out = s.substr(begin, end - begin + 1);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Content-Length as the digits it must be; nullopt when it is not a byte count, UINT64_MAX when
// it is one too large to hold (refused as too large all the same).
std::optional<uint64_t> parse_length(const std::string& text) {
  const std::string t = lower_trimmed(text);
  if (t.empty()) return std::nullopt;
  uint64_t value = 0;
  for (const char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return UINT64_MAX;
    value = value * 10 + digit;
  }
  return value;
}

void answer(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(dump_json(error_body(error)), "application/json");
  res.set_header("Connection", "close");
}

}  // namespace

HttpServer::HttpServer(const ServerLimits& limits) : limits_(limits) {
  new_task_queue = [this] { return new ConnectionThreads(limits_.max_connections); };
  // httplib's own body reading still applies this (a Content-Length request), though
  // check_request has refused an oversized one before.
  set_payload_max_length(limits.connection.max_body_bytes);
  // Only for the Keep-Alive header httplib writes (whole seconds); the wait itself is ours.
  set_keep_alive_timeout(static_cast<time_t>(std::ceil(limits.connection.idle_timeout_s)));
  // httplib sets these as SO_RCVTIMEO/SO_SNDTIMEO on each accepted socket; our stream polls with
  // its own deadlines and never blocks in recv/send, so they are only a backstop.
  const auto whole = [](double s) { return static_cast<time_t>(std::max(1.0, std::ceil(s))); };
  set_read_timeout(whole(limits.connection.read_timeout_s), 0);
  set_write_timeout(whole(limits.connection.write_timeout_s), 0);
  set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (auto error = check_request(req)) {
      answer(res, *error);
      return error->status();
    }
    return 100;
  });
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (auto error = check_request(req)) {
      answer(res, *error);
      return HandlerResponse::Handled;
    }
    return HandlerResponse::Unhandled;
  });
}

std::optional<ApiError> HttpServer::check_request(const httplib::Request& req) {
  ConnectionState* connection = current_connection();
  if (!connection || connection->checked) return std::nullopt;
  connection->checked = true;
  // The methods httplib reads a body for (detail::expect_content); a GET's body is not read,
  // and its bytes then fail as the next request (400, the connection closed).
  const std::string& m = req.method;
  if (m != "POST" && m != "PUT" && m != "PATCH" && m != "DELETE" && m != "PRI") return std::nullopt;
  const auto refuse_body = [&](int status, std::string message, std::string code = "") {
    connection->close_after = true;  // the body stays unread: nothing after it on this connection is a request
    return std::optional<ApiError>(ApiError(status, std::move(message), "", "", std::move(code)));
  };
  const size_t encodings = req.headers.count("Transfer-Encoding"), lengths = req.headers.count("Content-Length");
  if (encodings > 1) return refuse_body(400, "Transfer-Encoding: given more than once");
  if (lengths > 1) return refuse_body(400, "Content-Length: given more than once");
  bool chunked = false;
  if (encodings == 1) {
    const std::string te = lower_trimmed(req.get_header_value("Transfer-Encoding"));
    if (te != "chunked")
      return refuse_body(501, "Transfer-Encoding: '" + te + "' is not supported (only chunked, or a Content-Length)",
                         "not_implemented");
    if (lengths == 1) return refuse_body(400, "Content-Length and Transfer-Encoding: chunked together: send one of them");
    chunked = true;
  }
  uint64_t length = 0;
  if (lengths == 1) {
    const std::string text = req.get_header_value("Content-Length");
    const auto parsed = parse_length(text);
    if (!parsed) return refuse_body(400, "Content-Length: '" + text + "' is not a byte count");
    length = *parsed;
    // At once, from the header: httplib would read (and drop) the whole announced body first.
    if (length > limits_.connection.max_body_bytes)
      return refuse_body(413, "the request body (Content-Length " + lower_trimmed(text) + ") is larger than --max-body-bytes (" +
                                  std::to_string(limits_.connection.max_body_bytes) + ")");
  } else if (!chunked) {
    if (m == "DELETE") return std::nullopt;  // httplib reads no body for a DELETE without a length
    // httplib would read until the client closes, holding all of it in memory.
    return refuse_body(411, m + " without Content-Length or Transfer-Encoding: chunked: the body's length is required",
                       "length_required");
  }
  if (req.has_header("Content-Encoding")) {
    const std::string ce = lower_trimmed(req.get_header_value("Content-Encoding"));
    // httplib would inflate gzip/brotli bodies with no limit on the result (a small zip bomb).
    if (ce != "identity")
      return refuse_body(415, "Content-Encoding: '" + ce + "' is not accepted: send the body uncompressed",
                         "unsupported_media_type");
  }
  size_t taken = requests_with_body_.load();
  do {
    if (taken >= limits_.max_requests_with_body)
      return refuse_body(503,
                         "the server is busy: --http-threads (" + std::to_string(limits_.max_requests_with_body) +
                             ") requests are already being served; try again later",
                         "server_busy");
  } while (!requests_with_body_.compare_exchange_weak(taken, taken + 1));
  connection->holds_slot = true;
  connection->stream->limit_body(chunked ? limits_.connection.max_body_bytes : length);
  return std::nullopt;
}

bool HttpServer::admit_client(const std::string& address) {
  std::lock_guard<std::mutex> lock(clients_mutex_);
  size_t& open = clients_[address];
  if (open >= limits_.max_connections_per_client) {
    if (open == 0) clients_.erase(address);
    return false;
  }
  ++open;
  return true;
}

void HttpServer::forget_client(const std::string& address) {
  std::lock_guard<std::mutex> lock(clients_mutex_);
  auto it = clients_.find(address);
  if (it != clients_.end() && --it->second == 0) clients_.erase(it);
}

void HttpServer::refuse(int fd, const ApiError& error) {
  // Written without waiting (a fresh socket's buffer has room), on whichever thread refuses.
  const std::string body = dump_json(error_body(error));
  const std::string reason = error.status() == 503 ? "Service Unavailable" : "Error";
  const std::string response = "HTTP/1.1 " + std::to_string(error.status()) + " " + reason +
                               "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  (void)::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (t_no_thread_free) {
    warn_refused("refused a connection: --max-connections (" + std::to_string(limits_.max_connections) + ") are open");
    refuse(sock, ApiError(503,
                          "the server has --max-connections (" + std::to_string(limits_.max_connections) +
                              ") connections open; try again later",
                          "", "", "too_many_connections"));
    return false;
  }
  const auto accepted = Clock::now();
  const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  ConnectionStream stream(sock, limits_.connection, stopping);
  std::string address;
  int port = 0;
  stream.get_remote_ip_and_port(address, port);
  if (!admit_client(address)) {
    warn_refused("refused a connection from " + address + ": it has --max-connections-per-client (" +
                 std::to_string(limits_.max_connections_per_client) + ") open");
    refuse(sock, ApiError(503,
                          "this client has --max-connections-per-client (" + std::to_string(limits_.max_connections_per_client) +
                              ") connections open; close some",
                          "", "", "too_many_connections"));
    return false;
  }
  ++open_connections_;
  ConnectionState state;
  state.stream = &stream;
  CurrentConnectionScope scope(&state);
  const auto after = [](double s) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  // The first request's head is due --header-timeout-s after connecting (a client that connects
  // and says nothing is one more trickler); a later one's from its first byte, after at most
  // --idle-timeout-s of quiet.
  Clock::time_point head_deadline =
      accepted + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.connection.header_timeout_s));
  bool ret = false;
  for (size_t left = std::max<size_t>(keep_alive_max_count_, 1); left > 0 && !stopping(); --left) {
    const bool first = left == std::max<size_t>(keep_alive_max_count_, 1);
    if (!stream.wait_for_request(first ? head_deadline : after(limits_.connection.idle_timeout_s), stopping)) break;
    if (!first) head_deadline = after(limits_.connection.header_timeout_s);
    stream.begin_request(head_deadline);
    state.checked = false;
    bool closed_by_client = false;
    ret = process_request(stream, left == 1, closed_by_client, nullptr);
    if (state.holds_slot) {
      --requests_with_body_;
      state.holds_slot = false;
    }
    if (!ret || closed_by_client || state.close_after || stream.failure()) break;
  }
  if (state.close_after || stream.failure()) {
    close_lingering(sock, 1.0);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  --open_connections_;
  forget_client(address);
  return ret;
}

}  // namespace era::server
