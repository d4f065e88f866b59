#pragma once
// Internal header: what may leave a public call. era::Error and the caller's own on_text
// exceptions pass; everything else (LibTorch, OpenCV, the standard library) becomes kRuntime.
#include <exception>
#include <functional>
#include <string>

namespace era {

// What an on_text callback threw, carried through the generator untouched (it is no
// std::exception, so no handler on the way converts it) and rethrown as it was.
struct CallbackThrew {
  std::exception_ptr error;
};

// Wraps `on_text` so its exceptions travel as CallbackThrew (null stays null).
std::function<bool(const std::string&)> relay_exceptions(const std::function<bool(const std::string&)>& on_text);

// Called from a catch (...) around a public call.
[[noreturn]] void rethrow_as_era_error();

}  // namespace era
