#pragma once
// One client connection as era_server reads it. httplib's own stream gives each recv() the same
// timeout, so a client sending one header byte every few seconds, or a body that never ends,
// holds its thread for ever; this stream puts a deadline on the whole request head, a stall
// limit and a deadline on the body, a byte budget on both, and a stall limit on writing the
// answer. The connection's state (this stream, whether the answer must be its last) is reachable
// from the route handlers through current_connection(): one thread serves one connection at a time.
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace era::server {

// era_server's connection flags (src/apps/cli/era_server.cpp; docs/server.md).
struct ConnectionLimits {
  double header_timeout_s = 10;              // --header-timeout-s: the whole head, from connecting (or its first byte)
  double read_timeout_s = 30;                // --read-timeout-s: a body pausing between bytes
  double body_timeout_s = 600;               // the whole body (--timeout-s, at least 1 s)
  double write_timeout_s = 30;               // --write-timeout-s: a client not taking the answer
  double idle_timeout_s = 5;                 // --idle-timeout-s: between requests on a kept-alive connection
  size_t max_head_bytes = size_t{64} << 10;  // request line and headers together
  size_t max_body_bytes = size_t{32} << 20;  // --max-body-bytes
};

// Why reading a request stopped, as the answer the client gets (the connection then closes).
struct ReadFailure {
  int status = 400;
  std::string message;
  std::string code;
};

class ConnectionStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  // `stopping`: whether the server is stopping; a head still arriving is then given up (503)
  // rather than waited for up to --header-timeout-s.
  ConnectionStream(int fd, const ConnectionLimits& limits, std::function<bool()> stopping = nullptr);

  // Waits until the client sends a byte (true), or `until` passes, the client closes or
  // `stopping()` says the server is stopping (false); polls `stopping` a few times a second.
  bool wait_for_request(Clock::time_point until, const std::function<bool()>& stopping);
  // A request starts: its head must be complete by `head_deadline`; the body budget resets to
  // --max-body-bytes until limit_body() says otherwise.
  void begin_request(Clock::time_point head_deadline);
  // The head has been read: its body is `budget` bytes as sent (Content-Length, or at most
  // --max-body-bytes of chunked framing and data together). Reading past it fails with 413.
  void limit_body(uint64_t budget);

  const std::optional<ReadFailure>& failure() const { return failure_; }
  // The client closed or reset the connection (a peek, never consuming a byte): how a handler
  // that is not writing anything notices that nobody waits for its answer.
  bool client_gone() const;

  // httplib::Stream
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  ssize_t fill();  // refills the buffer: > 0 bytes, 0 the client closed, -1 failed (failure_ set when ours)
  ssize_t fail(int status, std::string message, std::string code);

  const int fd_;
  const ConnectionLimits limits_;
  const std::function<bool()> stopping_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  // The head: bytes so far, and where the blank line that ends it may be (httplib's rule: after
  // the request line, a line that is exactly CRLF).
  bool in_head_ = true;
  size_t head_bytes_ = 0, line_index_ = 0, line_length_ = 0;
  bool last_was_cr_ = false;
  Clock::time_point head_deadline_{}, body_deadline_{};
  uint64_t body_bytes_ = 0, body_budget_ = 0;
  std::optional<ReadFailure> failure_;
};

// What the handlers of the request being served on this thread may know about its connection.
struct ConnectionState {
  ConnectionStream* stream = nullptr;
  bool checked = false;      // the request's framing was checked (HttpServer::check_request)
  bool close_after = false;  // this answer is the connection's last (its body may be unread)
  bool holds_slot = false;   // counted against --http-threads
};

// The connection this thread serves now; nullptr off a connection thread.
ConnectionState* current_connection();

// Makes `state` this thread's current connection for the scope's lifetime.
class CurrentConnectionScope {
 public:
  explicit CurrentConnectionScope(ConnectionState* state);
  ~CurrentConnectionScope();
  CurrentConnectionScope(const CurrentConnectionScope&) = delete;
  CurrentConnectionScope& operator=(const CurrentConnectionScope&) = delete;

 private:
  ConnectionState* previous_;
};

// The client of the request served on this thread has gone (false off a connection thread).
bool client_gone();

// Why this thread's request could not be read, if it could not; the connection is then marked
// to close after the answer.
std::optional<ReadFailure> current_read_failure();

// Makes the answer to this thread's request its connection's last (nothing off a connection thread).
void close_after_this_answer();

// Closes `fd` gracefully after an answer sent before the request was read in full: shuts the
// sending side, then reads and drops what the client still sends for at most `linger_s`, so the
// client reads the answer instead of a connection reset.
void close_lingering(int fd, double linger_s);

}  // namespace era::server
