// era_server: an OpenAI-compatible HTTP server (POST /v1/chat/completions, GET /v1/models,
// GET /health) over one era::Session. Only flags, the listening socket and signals live here;
// the endpoints are src/apps/server/ (docs/server.md).
#include <httplib.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

#include "apps/cli/common_flags.h"
#include "apps/cli/entry.h"
#include "apps/server/routes.h"
#include "era/era.h"

namespace {

struct Flags {
  era::cli::ModelFlags model;
  era::cli::GenerationFlags gen;
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t queue = 8;
  size_t max_body_bytes = size_t{32} << 20;
  double timeout_s = 600;
  int http_threads = 8;
  double header_timeout_s = 10;
  double read_timeout_s = 30;
  double write_timeout_s = 30;
  double idle_timeout_s = 5;
  size_t max_connections = 256;
  size_t max_connections_per_client = 16;
  std::vector<std::string> allow_dirs;
  bool quiet = false;
};

// SIGINT / SIGTERM only record themselves (the handler must be async-signal-safe, and httplib's
// stop() is not); a watcher thread sees the flag and stops the server from ordinary code. A
// handler rather than a blocked mask: LibTorch may start threads before main(), which would not
// inherit the mask and would take the default action (terminate) instead.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void record_stop_signal(int sig) { g_stop_signal = sig; }

void watch_for_stop_signal(httplib::Server& server, const std::atomic<bool>& finished) {
  bool told = false;
  while (!finished) {
    if (g_stop_signal != 0) {
      if (!told)
        spdlog::warn("era_server: signal {}: finishing the requests in flight, then stopping", static_cast<int>(g_stop_signal));
      told = true;
      // Again on every tick: a signal that came before listen_after_bind() started found
      // nothing to stop yet.
      server.stop();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int run(const Flags& f) {
  struct sigaction on_stop {};
  on_stop.sa_handler = record_stop_signal;
  sigemptyset(&on_stop.sa_mask);
  sigaction(SIGINT, &on_stop, nullptr);
  sigaction(SIGTERM, &on_stop, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not the end of the server
  spdlog::set_default_logger(spdlog::stderr_color_mt("era_server"));
  spdlog::set_level(f.quiet ? spdlog::level::warn : spdlog::level::info);

  era::Request defaults = era::cli::base_request(f.gen);
  era::validate_request(defaults);
  era::server::ImageSourcePolicy images(f.allow_dirs);
  era::Session session = era::Session::open(f.model.model, era::cli::session_options(f.model));
  era::server::RequestQueue queue(f.queue);
  const era::ModelInfo info = session.info();
  era::validate_request(defaults, info);  // -n below the model's context
  era::server::ServerLimits limits;
  limits.connection.header_timeout_s = f.header_timeout_s;
  limits.connection.read_timeout_s = f.read_timeout_s;
  // The whole body gets the request's time, but never under a second: a shorter one would cut
  // off a client still sending its image while the generation itself may stop sooner.
  limits.connection.body_timeout_s = std::max(f.timeout_s, 1.0);
  limits.connection.write_timeout_s = f.write_timeout_s;
  limits.connection.idle_timeout_s = f.idle_timeout_s;
  limits.connection.max_body_bytes = f.max_body_bytes;
  limits.max_connections = f.max_connections;
  limits.max_connections_per_client = f.max_connections_per_client;
  limits.max_requests_with_body = static_cast<size_t>(f.http_threads);
  era::server::HttpServer server(limits);
  era::server::ServerContext context{session, defaults, images, queue, info.name, info, f.timeout_s, &server};
  era::server::install_routes(server, context);

  int port = f.port;
  if (port == 0) {
    port = server.bind_to_any_port(f.host);
    if (port < 0) throw era::Error(era::ErrorCode::kInvalidArgument, "--host " + f.host + ": cannot listen there");
  } else if (!server.bind_to_port(f.host, port)) {
    throw era::Error(era::ErrorCode::kInvalidArgument,
                     "--host " + f.host + " --port " + std::to_string(port) + ": cannot listen there (in use?)");
  }
  // Tests and scripts read the port from this line (--port 0 picks a free one).
  std::printf("era_server: listening on http://%s:%d (model %s)\n", f.host.c_str(), port, context.model_name.c_str());
  std::fflush(stdout);

  std::atomic<bool> finished{false};
  std::thread signals(watch_for_stop_signal, std::ref(server), std::cref(finished));
  const bool listened = server.listen_after_bind();  // returns after stop(), the HTTP threads joined
  finished = true;
  signals.join();
  queue.stop();
  if (!listened && g_stop_signal == 0) throw era::Error(era::ErrorCode::kRuntime, "the listening socket failed");
  std::printf("era_server: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "era_server: an OpenAI-compatible chat-completions server over a multimodal model (a Hugging Face folder or an era "
      "bundle; ERA reduction)"};
  era::cli::add_model_flags(app, f.model);
  app.get_option("--model")->required();
  era::cli::add_generation_flags(app, f.gen);
  app.add_option("--host", f.host, "address to listen on")->capture_default_str();
  app.add_option("--port", f.port, "TCP port; 0 = pick a free one (printed on the first line)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--queue", f.queue, "requests that may wait while one generates; more get HTTP 503")
      ->check(CLI::Range(size_t{1}, size_t{4096}))
      ->capture_default_str();
  app.add_option("--max-body-bytes", f.max_body_bytes, "largest request body; larger gets HTTP 413")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 32))
      ->capture_default_str();
  app.add_option("--timeout-s", f.timeout_s,
                 "seconds per request, from arrival to the last token (finish_reason \"timeout\"; fractions allowed); "
                 "also the most a request body may take to arrive, at least 1 s (HTTP 408)")
      ->check(era::cli::finite_in(0.001, 86400.0))  // not CLI::Range: NaN passes its comparisons
      ->capture_default_str();
  app.add_option("--http-threads", f.http_threads,
                 "requests with a body (chat completions) served at once, from reading the body to the last byte of "
                 "the answer; more get HTTP 503. Bounds the memory bodies take (this times --max-body-bytes). "
                 "GET /health and /v1/models are not counted: they answer while all are busy")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--max-connections", f.max_connections,
                 "connections open at once, each on its own thread (an idle or slow client holds one until its "
                 "timeout); more are answered HTTP 503 at once")
      ->check(CLI::Range(size_t{1}, size_t{512}))  // httplib answers 500 on a socket numbered past FD_SETSIZE (1024)
      ->capture_default_str();
  app.add_option("--max-connections-per-client", f.max_connections_per_client,
                 "connections open at once from one client address; more are answered HTTP 503 at once. Behind a "
                 "reverse proxy every client is the proxy: raise it to --max-connections and limit clients there")
      ->check(CLI::Range(size_t{1}, size_t{512}))
      ->capture_default_str();
  app.add_option("--header-timeout-s", f.header_timeout_s,
                 "seconds a client has for a whole request head (request line and headers), from connecting or from "
                 "the first byte of a later request on the connection; a client trickling bytes is cut off there "
                 "(HTTP 408, connection closed)")
      ->check(era::cli::finite_in(0.0, 3600.0, true))
      ->capture_default_str();
  app.add_option("--read-timeout-s", f.read_timeout_s,
                 "seconds a request body may pause between bytes (HTTP 408, connection closed)")
      ->check(era::cli::finite_in(0.0, 3600.0, true))
      ->capture_default_str();
  app.add_option("--write-timeout-s", f.write_timeout_s,
                 "seconds a client may leave its answer unread with the socket full; then the connection is closed "
                 "(a stream's generation cancelled)")
      ->check(era::cli::finite_in(0.0, 3600.0, true))
      ->capture_default_str();
  app.add_option("--idle-timeout-s", f.idle_timeout_s,
                 "seconds a kept-alive connection may wait quietly for its next request before it is closed; 0 = "
                 "close after each answer")
      ->check(era::cli::finite_in(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--allow-dir", f.allow_dirs,
                 "folder local images (absolute paths, file:// URLs) may come from; repeatable; none = local files refused");
  app.add_flag("-q,--quiet", f.quiet, "log warnings only (default: one line per request on stderr)");
  return era::cli::run_tool("era_server", app, argc, argv, [&] { return run(f); });
}
