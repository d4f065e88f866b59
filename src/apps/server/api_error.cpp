#include "apps/server/api_error.h"

namespace era::server {

std::string ApiError::type() const {
  if (!type_.empty()) return type_;
  if (status_ == 401 || status_ == 403) return "permission_error";
  if (status_ == 404) return "not_found_error";
  if (status_ == 503) return "overloaded_error";
  if (status_ >= 500) return "server_error";
  return "invalid_request_error";
}

std::string ApiError::code() const {
  if (!code_.empty()) return code_;
  switch (status_) {
    case 400: return "invalid_request";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 408: return "timeout";
    case 413: return "request_too_large";
    case 503: return "queue_full";
    default: return status_ >= 500 ? "internal_error" : "error";
  }
}

nlohmann::json error_body(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type()},
            {"param", error.param().empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param())},
            {"code", error.code()}}}};
}

ApiError api_error_from(const Error& error) {
  if (error.code() == ErrorCode::kRuntime) return ApiError(500, std::string("the model failed: ") + error.what());
  return ApiError(400, error.what());
}

}  // namespace era::server
