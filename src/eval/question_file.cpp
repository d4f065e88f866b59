#include "eval/question_file.h"

#include <fstream>

#include "era/error.h"

namespace era::eval {
namespace {

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

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
  const auto image = j.find("image");
  if (image == j.end() || !image->is_string() || image->get<std::string>().empty()) {
    return problem("\"image\" must be a non-empty string");
  }
  const auto text = j.find("text");
  if (text == j.end() || !text->is_string()) return problem("\"text\" must be a string");
  q.image = image->get<std::string>();
  q.text = text->get<std::string>();
  const auto category = j.find("category");
  if (category != j.end() && category->is_string()) q.category = category->get<std::string>();
  return q;
}

std::vector<Question> read_questions(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kInvalidArgument, "cannot read the question file " + path);
  std::vector<Question> out;
  std::string text;
  int64_t file_line = 0;
  while (std::getline(in, text)) {
    ++file_line;
    if (file_line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // UTF-8 BOM
    if (!text.empty() && text.back() == '\r') text.pop_back();                    // CRLF files
    if (blank(text)) continue;
    out.push_back(parse_question(text, static_cast<int64_t>(out.size()), file_line));
  }
  if (in.bad()) throw Error(ErrorCode::kInvalidArgument, "error reading the question file " + path);
  return out;
}

}  // namespace era::eval
