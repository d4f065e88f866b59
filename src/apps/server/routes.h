#pragma once
// The HTTP endpoints on cpp-httplib: POST /v1/chat/completions (whole or streamed as server-sent
// events), GET /v1/models, GET /health, and the OpenAI-style JSON error body for every failure
// (bad input 400, refused image source 403, unknown route 404, wrong method 405, head or body too
// slow 408, body over --max-body-bytes 413, queue full 503, anything unexpected 500; the framing
// refusals of server/http_server.h: 411, 415, 431, 501, 503).
#include <httplib.h>

#include <string>

#include "apps/server/http_server.h"
#include "apps/server/image_source.h"
#include "apps/server/request_queue.h"
#include "era/era.h"

namespace era::server {

struct ServerContext {
  Session& session;
  Request defaults;  // the server's flags: what a request does not say
  ImageSourcePolicy images;
  RequestQueue& queue;
  std::string model_name;            // the bundle's (Session::info().name)
  ModelInfo model;                   // Session::info(), for the checks that depend on the model
  double timeout_s = 600;            // seconds per request, from arrival to the last token
  const HttpServer* http = nullptr;  // for /health's connection counts (none: zeros)
};

// Registers every route and handler on `server`; `context` must outlive it.
void install_routes(httplib::Server& server, ServerContext& context);

}  // namespace era::server
