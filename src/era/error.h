#pragma once
// The one exception type the library throws. Every failure a user can cause (a bad image, a bad
// bundle, an over-long prompt, a bad option) becomes an era::Error whose message names the item;
// the CLI prints it as one line and exits non-zero.
#include <stdexcept>
#include <string>

namespace era {

enum class ErrorCode {
  kInvalidArgument,  // an option or request field is out of range
  kImage,            // an image is missing, unreadable, corrupt or too large
  kBundle,           // a model bundle is missing files, malformed or inconsistent
  kPrompt,           // the prompt cannot be encoded or does not fit the context
  kRuntime,          // the model failed while running (out of memory, device error)
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace era
