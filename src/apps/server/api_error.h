#pragma once
// The one error type of the HTTP layer: an HTTP status plus the OpenAI error object
// {"error": {"message", "type", "param", "code"}} that every failed request gets as its body, so
// an OpenAI client shows the message (which names the offending field) whatever went wrong.
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

#include "era/error.h"

namespace era::server {

class ApiError : public std::runtime_error {
 public:
  // `param`: the request field at fault, spelled as in the JSON ("messages[2].content[1].type");
  // empty when no single field is (the body is not JSON, the queue is full).
  // `type`, `code`: given where the status alone says too little (a 503 for a full queue and one
  // for a request whose time ran out while it waited are both "overloaded", with other codes).
  ApiError(int status, std::string message, std::string param = "", std::string type = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), type_(std::move(type)), code_(std::move(code)) {}
  int status() const noexcept { return status_; }
  const std::string& param() const noexcept { return param_; }
  // The OpenAI error type: given, or the one customary for the status.
  std::string type() const;
  // A short machine-readable code: given, or the one per status ("invalid_request", "queue_full", ...).
  std::string code() const;

 private:
  int status_;
  std::string param_, type_, code_;
};

// {"error": {...}} for `error`.
nlohmann::json error_body(const ApiError& error);

// A library error raised while answering: bad input (an image that does not decode, a prompt
// that does not fit) is the client's (400), a model failure the server's (500).
ApiError api_error_from(const Error& error);

}  // namespace era::server
