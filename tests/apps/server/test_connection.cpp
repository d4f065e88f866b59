// The connection stream's limits on a socket pair: the whole head has one deadline however the
// bytes trickle, the head ends where httplib's does, a body cannot be read past its budget, a
// stalled body and an oversized head fail with their statuses, and a client that closed is seen
// without consuming its bytes.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "apps/server/connection.h"

namespace era::server {
// Named rather than anonymous: era_tests is a unity build, and these helpers' names are common.
namespace connection_stream_test {

using Clock = ConnectionStream::Clock;

struct SocketPair {
  int server = -1, client = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0) {
      server = fds[0];
      client = fds[1];
    }
  }
  ~SocketPair() {
    if (server >= 0) ::close(server);
    if (client >= 0) ::close(client);
  }
  void send(const std::string& s) const { ASSERT_EQ(::write(client, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
};

ConnectionLimits quick_limits() {
  ConnectionLimits limits;
  limits.header_timeout_s = 0.3;
  limits.read_timeout_s = 0.2;
  limits.body_timeout_s = 5;
  limits.write_timeout_s = 0.2;
  limits.max_head_bytes = 256;
  limits.max_body_bytes = 1024;
  return limits;
}

Clock::time_point after(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Reads a byte at a time (as httplib reads a head) until a read fails or returns 0.
std::string read_bytes(ConnectionStream& stream, size_t most = 1 << 20) {
  std::string got;
  char c;
  while (got.size() < most && stream.read(&c, 1) == 1) got += c;
  return got;
}

TEST(ConnectionStream, ATrickledHeadFailsAtItsDeadlineNotPerByte) {
  SocketPair pair;
  ConnectionStream stream(pair.server, quick_limits());
  stream.begin_request(after(0.3));
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    pair.send("GET / HTTP/1.1\r\n");
    while (!stop) {  // a byte every 50 ms: far inside any per-read timeout
      (void)::write(pair.client, "X", 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto start = Clock::now();
  read_bytes(stream);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  trickle.join();
  ASSERT_TRUE(stream.failure());
  EXPECT_EQ(stream.failure()->status, 408);
  EXPECT_NE(stream.failure()->message.find("--header-timeout-s"), std::string::npos);
  EXPECT_LT(took, 1.0);
}

TEST(ConnectionStream, TheHeadEndsAtTheBlankLineAndTheBodyAtItsBudget) {
  SocketPair pair;
  ConnectionStream stream(pair.server, quick_limits());
  stream.begin_request(after(5));
  pair.send("POST / HTTP/1.1\r\nA: b\r\n\r\nBODYMORE");
  char buf[256];
  // Asked for more, the head phase hands over no byte past the blank line.
  std::string head;
  while (head.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = stream.read(buf, sizeof buf);
    ASSERT_GT(n, 0);
    head.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(head, "POST / HTTP/1.1\r\nA: b\r\n\r\n");
  stream.limit_body(4);
  ASSERT_EQ(stream.read(buf, sizeof buf), 4);
  EXPECT_EQ(std::string(buf, 4), "BODY");
  EXPECT_EQ(stream.read(buf, sizeof buf), -1);
  ASSERT_TRUE(stream.failure());
  EXPECT_EQ(stream.failure()->status, 413);
}

TEST(ConnectionStream, AnOversizedHeadIs431AndAStalledBody408) {
  {
    SocketPair pair;
    ConnectionStream stream(pair.server, quick_limits());
    stream.begin_request(after(5));
    pair.send("GET / HTTP/1.1\r\nX: " + std::string(400, 'a') + "\r\n\r\n");
    const std::string got = read_bytes(stream);
    EXPECT_LE(got.size(), 256u);
    ASSERT_TRUE(stream.failure());
    EXPECT_EQ(stream.failure()->status, 431);
  }
  {
    SocketPair pair;
    ConnectionStream stream(pair.server, quick_limits());
    stream.begin_request(after(5));
    pair.send("POST / HTTP/1.1\r\n\r\nab");
    EXPECT_EQ(read_bytes(stream), "POST / HTTP/1.1\r\n\r\nab");
    ASSERT_TRUE(stream.failure());
    EXPECT_EQ(stream.failure()->status, 408);
    EXPECT_NE(stream.failure()->message.find("--read-timeout-s"), std::string::npos);
  }
}

TEST(ConnectionStream, AClientThatClosedIsSeenWithoutConsumingItsBytes) {
  SocketPair pair;
  ConnectionStream stream(pair.server, quick_limits());
  EXPECT_FALSE(stream.client_gone());
  pair.send("G");
  EXPECT_FALSE(stream.client_gone());  // a pipelined next request is not a departure
  EXPECT_TRUE(stream.wait_for_request(after(1), nullptr));
  stream.begin_request(after(1));
  char c;
  ASSERT_EQ(stream.read(&c, 1), 1);  // the peeks kept the byte
  EXPECT_EQ(c, 'G');
  ::close(pair.client);
  pair.client = -1;
  EXPECT_TRUE(stream.client_gone());
  EXPECT_FALSE(stream.wait_for_request(after(1), nullptr));
}

TEST(ConnectionStream, AQuietConnectionEndsItsWaitAtTheLimitOrWhenStopping) {
  SocketPair pair;
  ConnectionStream stream(pair.server, quick_limits());
  auto start = Clock::now();
  EXPECT_FALSE(stream.wait_for_request(after(0.2), nullptr));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  start = Clock::now();
  EXPECT_FALSE(stream.wait_for_request(after(30), [] { return true; }));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
}

TEST(ConnectionStream, AHeadStillArrivingIsGivenUpWhenTheServerStops) {
  SocketPair pair;
  std::atomic<bool> stopping{false};
  ConnectionStream stream(pair.server, quick_limits(), [&] { return stopping.load(); });
  stream.begin_request(after(30));
  pair.send("GET / HTTP/1.1\r\nX");
  std::thread stop([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stopping = true;
  });
  const auto start = Clock::now();
  read_bytes(stream);
  stop.join();
  ASSERT_TRUE(stream.failure());
  EXPECT_EQ(stream.failure()->status, 503);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
}

}  // namespace connection_stream_test
}  // namespace era::server
