#include "util/error_text.h"

#include <cctype>
#include <sstream>
#include <vector>

namespace era {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// "RuntimeError: ...", "ValueError: ...": a Python-style exception line as TorchScript prints it.
bool is_exception_line(const std::string& line) {
  const auto colon = line.find(": ");
  if (colon == std::string::npos || colon < 5) return false;
  const std::string name = line.substr(0, colon);
  if (name.compare(name.size() - 5, 5, "Error") != 0 && name.compare(name.size() - 5, 5, "ption") != 0) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

std::string error_summary(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) return "";
  if (lines.front().find("TorchScript interpreter") != std::string::npos) {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (is_exception_line(*it)) return *it;
    }
  }
  return lines.front();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace era
