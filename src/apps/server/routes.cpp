#include "apps/server/routes.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>

#include "apps/server/api_error.h"
#include "apps/server/connection.h"
#include "apps/server/generation.h"
#include "apps/server/openai_request.h"
#include "apps/server/openai_response.h"
#include "apps/server/sse.h"

namespace era::server {
namespace {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) { send_json(res, error.status(), error_body(error)); }

// "chatcmpl-<random>-<n>": unique within the process and unlikely to repeat across restarts.
std::string next_completion_id() {
  static const uint64_t prefix = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof buf, "chatcmpl-%08llx%llu", static_cast<unsigned long long>(prefix & 0xffffffffULL),
                static_cast<unsigned long long>(++counter));
  return buf;
}

// The streamed answer: a first chunk with the role, one chunk per text piece, the last chunk with
// finish_reason, usage and the era extension, then [DONE]. A failed write means the client left:
// the generation is cancelled, which stops the model at its next piece.
void stream_answer(httplib::Response& res, std::shared_ptr<Generation> generation, CompletionIdentity id, bool include_usage) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [generation, id, include_usage](size_t, httplib::DataSink& sink) {
        const auto write = [&](const std::string& event) {
          if (sink.write(event.data(), event.size())) return true;
          generation->cancel();
          spdlog::info("era_server: {}: the client went away mid-stream; generation cancelled", id.id);
          return false;
        };
        if (!write(sse_event(chunk_json(id, {{"role", "assistant"}, {"content", ""}})))) return false;
        for (;;) {
          std::string text;
          const bool ended = generation->wait(text, std::chrono::milliseconds(200));
          if (!text.empty() && !write(sse_event(chunk_json(id, {{"content", text}})))) return false;
          if (ended) break;
        }
        if (generation->error()) {
          // The status line (200) has gone out: the error travels as an event, as OpenAI does.
          if (!write(sse_event(error_body(*generation->error())))) return false;
        } else {
          const Result& result = *generation->result();
          if (!write(sse_event(final_chunk_json(id, generation->request(), result, generation->timed_out())))) return false;
          if (include_usage && !write(sse_event(usage_chunk_json(id, result)))) return false;
        }
        if (!write(sse_done())) return false;
        sink.done();
        return true;
      },
      [generation](bool success) {
        if (!success) generation->cancel();
      });
}

void chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ChatRequest chat = parse_chat_request(req.body, ctx.defaults, ctx.images, &ctx.model);
  const auto deadline = Generation::Clock::now() +
                        std::chrono::duration_cast<Generation::Clock::duration>(std::chrono::duration<double>(ctx.timeout_s));
  auto generation = std::make_shared<Generation>(std::move(chat.request), deadline);
  Session& session = ctx.session;
  if (!ctx.queue.try_push([generation, &session] { generation->run(session); }))
    throw ApiError(503, "the server is busy: " + std::to_string(ctx.queue.capacity()) +
                            " requests are already waiting (--queue); try again later");
  const CompletionIdentity id{next_completion_id(), static_cast<int64_t>(std::time(nullptr)), ctx.model_name};
  if (chat.stream) return stream_answer(res, std::move(generation), id, chat.include_usage);
  // Nothing is written until the end, so a client that leaves is noticed by looking at its
  // socket a few times a second: the generation is cancelled as a stream's is, and this thread
  // (with its --http-threads slot) is free at once, even if the generation still waits in the queue.
  std::string ignored;
  while (!generation->wait(ignored, std::chrono::milliseconds(100))) {
    ignored.clear();
    if (client_gone()) {
      generation->cancel();
      spdlog::info("era_server: {}: the client went away before the answer; generation cancelled", id.id);
      throw ApiError(499, "the client went away before the answer", "", "", "client_closed");
    }
  }
  if (generation->error()) throw *generation->error();
  send_json(res, 200, completion_json(id, generation->request(), *generation->result(), generation->timed_out()));
}

// Runs `handler`, turning an ApiError into its JSON answer.
httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  };
}

httplib::Server::Handler method_not_allowed(const std::string& allowed) {
  return [allowed](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", allowed);
    send_error(res, ApiError(405, req.method + " is not allowed on " + req.path + " (use " + allowed + ")"));
  };
}

}  // namespace

void install_routes(httplib::Server& server, ServerContext& ctx) {
  server.Post("/v1/chat/completions",
              guarded([&ctx](const httplib::Request& req, httplib::Response& res) { chat_completions(ctx, req, res); }));
  server.Get("/v1/models", guarded([&ctx](const httplib::Request&, httplib::Response& res) {
               send_json(
                   res, 200,
                   {{"object", "list"},
                    {"data", json::array({{{"id", ctx.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "era"}}})}});
             }));
  server.Get("/health", guarded([&ctx](const httplib::Request&, httplib::Response& res) {
               send_json(
                   res, 200,
                   {{"status", "ok"},
                    {"model", ctx.model_name},
                    {"queue", {{"pending", ctx.queue.pending()}, {"busy", ctx.queue.busy()}, {"capacity", ctx.queue.capacity()}}},
                    {"connections",
                     {{"open", ctx.http ? ctx.http->open_connections() : 0},
                      {"requests_with_body", ctx.http ? ctx.http->requests_with_body() : 0}}}});
             }));
  for (const char* path : {"/v1/chat/completions"}) {
    server.Get(path, method_not_allowed("POST"));
    server.Put(path, method_not_allowed("POST"));
    server.Delete(path, method_not_allowed("POST"));
    server.Patch(path, method_not_allowed("POST"));
  }
  for (const char* path : {"/v1/models", "/health"}) {
    server.Post(path, method_not_allowed("GET"));
    server.Put(path, method_not_allowed("GET"));
    server.Delete(path, method_not_allowed("GET"));
    server.Patch(path, method_not_allowed("GET"));
  }
  // Statuses httplib sets itself (no route 404, body too large 413, a request it cannot parse
  // 400) get the same JSON body as the handlers' errors.
  server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    // A request that could not be read (head or body too slow, too large: server/connection.h)
    // reaches here as httplib's 400; it gets its own status and the reason, and the connection closes.
    if (const auto failure = current_read_failure()) {
      res.set_header("Connection", "close");
      send_error(res, ApiError(failure->status, failure->message, "", "", failure->code));
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib's own 400 (a request line or header it cannot parse) or 414 leaves the rest of that
    // request unread in the socket: nothing after it can be trusted as the next request.
    if (res.status == 400 || res.status == 414) {
      res.set_header("Connection", "close");
      close_after_this_answer();
    }
    std::string message;
    switch (res.status) {
      case 404:
        message = "no route " + req.method + " " + req.path + " (POST /v1/chat/completions, GET /v1/models, GET /health)";
        break;
      case 413: message = "the request body is larger than --max-body-bytes"; break;
      case 405: message = req.method + " is not allowed on " + req.path; break;
      default: message = "the request could not be served (HTTP " + std::to_string(res.status) + ")";
    }
    send_error(res, ApiError(res.status, message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("era_server: {} {}: internal error: {}", req.method, req.path, what);
    send_error(res, ApiError(500, "internal error: " + what));
  });
  server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::info("era_server: {} {} -> {}", req.method, req.path, res.status);
  });
}

}  // namespace era::server
