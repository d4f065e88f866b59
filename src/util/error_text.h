#pragma once
// Turning a LibTorch exception text into the one line a user should see.
#include <string>

namespace era {

// The line that says what went wrong: for a TorchScript interpreter failure ("The following
// operation failed in the TorchScript interpreter." + a traceback) the last "...Error: message"
// line at the end of the traceback; otherwise the first non-empty line (c10::Error appends a C++
// backtrace after it).
std::string error_summary(const std::string& text);

// `text` up to its first newline (all of it where it has none).
std::string first_line(const std::string& text);

}  // namespace era
