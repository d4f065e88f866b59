#pragma once
// The one exception type the library throws. Every failure a user can cause (a bad image, a bad
// bundle, an over-long prompt, a bad option) becomes an era::Error whose message names the item;
// the CLI prints it as one line and exits non-zero. Failures inside LibTorch, OpenCV or the
// standard library during a Session call (out of memory, a device error) are converted to
// kRuntime, so nothing else escapes; only an exception thrown by the caller's own on_text
// callback is passed through unchanged.
//
// Who throws what (details at each declaration in era/era.h and era/image.h):
//   Session::open              kInvalidArgument, kBundle, kRuntime
//   Session::generate          kInvalidArgument, kImage, kPrompt, kRuntime
//   Session::generate_batch    as generate (one bad request fails the whole batch)
//   Session::prepare           kInvalidArgument, kImage, kPrompt
//   Session::attention_report  as generate, and kInvalidArgument without an image
//   Session::info              kInvalidArgument (moved-from Session) only
//   Image::from_pixels / from_encoded   kImage (null or malformed buffer)
//   any call on a moved-from Session    kInvalidArgument
#include <stdexcept>
#include <string>

namespace era {

enum class ErrorCode {
  kInvalidArgument,  // an option or request field is out of range
  kImage,            // an image is missing, unreadable, corrupt or too large
  kBundle,           // a model bundle is missing files, malformed or inconsistent
  kPrompt,           // the prompt cannot be encoded or does not fit the context
  kRuntime,          // the model failed while running (out of memory, device error, an
                     // unexpected LibTorch/OpenCV exception)
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
