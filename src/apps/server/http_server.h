#pragma once
// era_server's httplib::Server with the limits a server facing untrusted clients needs, which
// httplib 0.11 (Debian 12's) lacks:
// - every connection gets a thread of its own, up to --max-connections (more are answered 503 at
//   once), and at most --max-connections-per-client from one address; so a client that trickles
//   its head, idles or waits for a generation holds only its own thread, and GET /health answers
//   while every generation slot is taken;
// - the request head has one deadline (--header-timeout-s), the body a stall limit
//   (--read-timeout-s) and a deadline (--timeout-s), writes a stall limit (--write-timeout-s),
//   and a kept-alive connection an idle limit (--idle-timeout-s) (server/connection.h);
// - a body is checked from its headers before a byte of it is read: a Content-Length over
//   --max-body-bytes gets 413 at once, a chunked body is cut off with 413 where it passes the
//   limit, a compressed one (a zip bomb) 415, one without a length 411; and requests with a body
//   at once are limited to --http-threads (503 beyond), which bounds the memory bodies take;
// - an answer given before the body was read closes the connection gracefully (lingering), so
//   the client reads the answer instead of a reset.
// httplib's accept loop, routing and response writing are kept: process_and_close_socket (a
// virtual of httplib::Server) is replaced with a loop over process_request on our own stream.
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "apps/server/api_error.h"
#include "apps/server/connection.h"

namespace era::server {

struct ServerLimits {
  ConnectionLimits connection;
  size_t max_connections = 256;            // --max-connections
  size_t max_connections_per_client = 16;  // --max-connections-per-client
  size_t max_requests_with_body = 8;       // --http-threads
};

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(const ServerLimits& limits);

  size_t open_connections() const { return open_connections_.load(); }
  size_t requests_with_body() const { return requests_with_body_.load(); }

 private:
  bool process_and_close_socket(socket_t sock) override;

  // The checks on a request's headers before its body is read (once per request: from the
  // Expect: 100-continue handler or the pre-routing one). Takes a --http-threads slot for a
  // request with a body. An error marks the connection to close after the answer.
  std::optional<ApiError> check_request(const httplib::Request& req);
  bool admit_client(const std::string& address);
  void forget_client(const std::string& address);
  void refuse(int fd, const ApiError& error);

  const ServerLimits limits_;
  std::mutex clients_mutex_;
  std::unordered_map<std::string, size_t> clients_;  // open connections per client address
  std::atomic<size_t> open_connections_{0};
  std::atomic<size_t> requests_with_body_{0};
};

}  // namespace era::server
