#include "apps/eval/question_file.h"

#include <tuple>

#include <cstdio>

#include "era/error.h"
#include "util/input_file.h"
#include "util/utf8.h"

namespace era::eval {
namespace {

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

// Offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF), or of a NUL byte, which no JSON text holds; npos when the text is clean.
size_t first_non_utf8_byte(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = s[i] == '\0' ? 0 : utf8::sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string::npos;
}

}  // namespace

Question parse_question(const std::string& line_text, int64_t line, int64_t file_line) {
  Question q;
  q.line = line;
  q.file_line = file_line;
  Json j;
  try {
    j = Json::parse(line_text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's messages start with "[json.exception.parse_error.101] "; keep the readable part.
    std::string what = e.what();
    const auto close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    q.error = "malformed question line: " + what;
    return q;
  }
  if (!j.is_object()) {
    q.error = "malformed question line: expected a JSON object, got " + std::string(j.type_name());
    return q;
  }
  const auto id = j.find("question_id");
  if (id != j.end()) q.question_id = *id;
  const auto problem = [&](const std::string& what) {
    q.error = "malformed question: " + what;
    return q;
  };
  if (id == j.end() || id->is_null()) return problem("no \"question_id\"");
  if (!id->is_number() && !id->is_string()) return problem("\"question_id\" must be a number or a string");
  const auto image = j.find("image"), video = j.find("video");
  if (image == j.end() && video == j.end()) return problem("no \"image\" or \"video\"");
  for (const auto& [field, it, out] : {std::tuple{"image", image, &q.image}, std::tuple{"video", video, &q.video}}) {
    if (it == j.end()) continue;
    if (!it->is_string() || it->template get<std::string>().empty()) {
      return problem(std::string("\"") + field + "\" must be a non-empty string");
    }
    *out = it->template get<std::string>();
    // "a\u0000b.png" is valid JSON, but the file system would read the path as "a": never truncate.
    if (out->find('\0') != std::string::npos) return problem(std::string("\"") + field + "\" holds a NUL byte");
  }
  const auto text = j.find("text");
  if (text == j.end() || !text->is_string()) return problem("\"text\" must be a string");
  q.text = text->get<std::string>();
  const auto category = j.find("category");
  if (category != j.end() && category->is_string()) q.category = category->get<std::string>();
  return q;
}

std::vector<Question> read_questions(const std::string& path) {
  const std::string content = read_input_file(path, "question file", uint64_t{4} << 30);
  // Not UTF-8 (a UTF-16 export, a binary file): refused as a whole, naming the first bad line,
  // rather than turned into one error record a line.
  if (content.rfind("\xFF\xFE", 0) == 0 || content.rfind("\xFE\xFF", 0) == 0) {
    throw Error(ErrorCode::kInvalidArgument, "question file " + path +
                                                 " line 1: starts with a UTF-16 byte order mark; the file must be UTF-8 "
                                                 "JSON lines (convert it: iconv -f UTF-16 -t UTF-8)");
  }
  std::vector<Question> out;
  int64_t file_line = 0;
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    std::string text = content.substr(start, end - start);
    start = end + 1;
    ++file_line;
    if (file_line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // UTF-8 BOM
    if (!text.empty() && text.back() == '\r') text.pop_back();                   // CRLF files
    const size_t bad = first_non_utf8_byte(text);
    if (bad != std::string::npos) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
      throw Error(ErrorCode::kInvalidArgument, "question file " + path + " line " + std::to_string(file_line) +
                                                   ": not UTF-8 text (byte " + byte + " at column " + std::to_string(bad + 1) +
                                                   "); the file must be UTF-8 JSON lines");
    }
    if (blank(text)) continue;
    out.push_back(parse_question(text, static_cast<int64_t>(out.size()), file_line));
  }
  return out;
}

}  // namespace era::eval
