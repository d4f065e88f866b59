#include "apps/server/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

namespace era::server {
namespace {

using Clock = ConnectionStream::Clock;

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

// Milliseconds until `deadline`, rounded up so a poll does not wake just short of it; 0 once past.
int millis_until(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// poll() for `events` until `deadline`, retrying on signals: > 0 ready, 0 the deadline passed, < 0 failed.
int poll_until(int fd, short events, Clock::time_point deadline, short* revents = nullptr) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, millis_until(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && Clock::now() < deadline) continue;  // woke a little early
    if (revents) *revents = p.revents;
    return r;
  }
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

thread_local ConnectionState* t_current = nullptr;

}  // namespace

ConnectionStream::ConnectionStream(int fd, const ConnectionLimits& limits, std::function<bool()> stopping)
    : fd_(fd), limits_(limits), stopping_(std::move(stopping)), buffer_(16384), body_budget_(limits.max_body_bytes) {}

bool ConnectionStream::wait_for_request(Clock::time_point until, const std::function<bool()>& stopping) {
  if (begin_ < end_) return true;  // the client sent its next request with the last one
  for (;;) {
    if (stopping && stopping()) return false;
    const auto now = Clock::now();
    if (now >= until) return false;
    const int r = poll_until(fd_, POLLIN, std::min(until, now + std::chrono::milliseconds(200)));
    if (r < 0) return false;
    if (r == 0) continue;
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return true;
    if (n == 0) return false;  // closed
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  }
}

void ConnectionStream::begin_request(Clock::time_point head_deadline) {
  in_head_ = true;
  head_bytes_ = line_index_ = line_length_ = 0;
  last_was_cr_ = false;
  head_deadline_ = head_deadline;
  body_bytes_ = 0;
  body_budget_ = limits_.max_body_bytes;
}

void ConnectionStream::limit_body(uint64_t budget) { body_budget_ = budget; }

ssize_t ConnectionStream::fail(int status, std::string message, std::string code) {
  if (!failure_) failure_ = ReadFailure{status, std::move(message), std::move(code)};
  return -1;
}

ssize_t ConnectionStream::fill() {
  for (;;) {
    // The head has one deadline for all of it: a per-recv timeout never expires for a client
    // that sends a byte just before it. The body may pause up to --read-timeout-s between bytes
    // and must be complete by its own deadline.
    const auto now = Clock::now();
    const auto deadline = in_head_ ? head_deadline_ : std::min(body_deadline_, now + seconds(limits_.read_timeout_s));
    // A head is waited for in slices, so a stopping server does not wait for a trickler.
    const bool sliced = in_head_ && stopping_;
    const int r = poll_until(fd_, POLLIN, sliced ? std::min(deadline, now + std::chrono::milliseconds(200)) : deadline);
    if (r < 0) return -1;
    if (r == 0 && sliced && Clock::now() < deadline) {
      if (stopping_()) return fail(503, "the server is stopping", "server_stopping");
      continue;
    }
    if (r == 0) {
      if (in_head_)
        return fail(408,
                    "the request head (request line and headers) did not arrive within --header-timeout-s (" +
                        format_seconds(limits_.header_timeout_s) + ")",
                    "header_timeout");
      if (Clock::now() >= body_deadline_)
        return fail(408, "the request body did not arrive within --timeout-s (" + format_seconds(limits_.body_timeout_s) + ")",
                    "body_timeout");
      return fail(408,
                  "the request body stalled for --read-timeout-s (" + format_seconds(limits_.read_timeout_s) + ") without a byte",
                  "read_timeout");
    }
    const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
    if (n > 0) {
      begin_ = 0;
      end_ = static_cast<size_t>(n);
      return n;
    }
    if (n == 0) return 0;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
  }
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (failure_) return -1;
  if (size == 0) return 0;
  if (begin_ == end_) {
    const ssize_t n = fill();
    if (n <= 0) return n;
  }
  size_t take = std::min(size, end_ - begin_);
  if (in_head_) {
    // httplib reads the head a byte at a time; hand over no more than the head, watching for its end.
    size_t i = 0;
    while (i < take) {
      if (++head_bytes_ > limits_.max_head_bytes)
        return fail(
            431,
            "the request head (request line and headers) is larger than " + std::to_string(limits_.max_head_bytes >> 10) + " KiB",
            "header_too_large");
      const char c = buffer_[begin_ + i++];
      if (c == '\n') {
        const bool blank = line_index_ > 0 && line_length_ == 1 && last_was_cr_;
        ++line_index_;
        line_length_ = 0;
        last_was_cr_ = false;
        if (blank) {
          in_head_ = false;
          body_deadline_ = Clock::now() + seconds(limits_.body_timeout_s);
          break;
        }
      } else {
        ++line_length_;
        last_was_cr_ = c == '\r';
      }
    }
    take = i;
  } else {
    if (body_bytes_ >= body_budget_)
      return fail(413,
                  "the request body is larger than --max-body-bytes (" + std::to_string(limits_.max_body_bytes) +
                      " bytes; a chunked body counts its framing)",
                  "request_too_large");
    take = static_cast<size_t>(std::min<uint64_t>(take, body_budget_ - body_bytes_));
    body_bytes_ += take;
  }
  std::copy(buffer_.data() + begin_, buffer_.data() + begin_ + take, ptr);
  begin_ += take;
  return static_cast<ssize_t>(take);
}

bool ConnectionStream::is_readable() const {
  if (begin_ < end_) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool ConnectionStream::is_writable() const {
  return poll_until(fd_, POLLOUT, Clock::now() + seconds(limits_.write_timeout_s)) > 0 && !client_gone();
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  // Each write may wait --write-timeout-s for room in the socket: a client that stops reading
  // its answer is cut off there (a failed write cancels a streamed generation).
  const auto deadline = Clock::now() + seconds(limits_.write_timeout_s);
  for (;;) {
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (poll_until(fd_, POLLOUT, deadline) <= 0) return -1;
  }
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

bool ConnectionStream::client_gone() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return true;
  if (!(p.revents & POLLIN)) return false;
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

ConnectionState* current_connection() { return t_current; }

CurrentConnectionScope::CurrentConnectionScope(ConnectionState* state) : previous_(t_current) { t_current = state; }

CurrentConnectionScope::~CurrentConnectionScope() { t_current = previous_; }

bool client_gone() { return t_current && t_current->stream && t_current->stream->client_gone(); }

std::optional<ReadFailure> current_read_failure() {
  if (!t_current || !t_current->stream || !t_current->stream->failure()) return std::nullopt;
  t_current->close_after = true;
  return t_current->stream->failure();
}

void close_after_this_answer() {
  if (t_current) t_current->close_after = true;
}

void close_lingering(int fd, double linger_s) {
  ::shutdown(fd, SHUT_WR);
  const auto until = Clock::now() + seconds(linger_s);
  char sink[16384];
  while (poll_until(fd, POLLIN, until) > 0) {
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0) break;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
  }
  ::close(fd);
}

}  // namespace era::server
