#include "apps/score/answers.h"

#include <fstream>
#include <sstream>

#include "apps/score/json_read.h"
#include "era/error.h"
#include "util/input_file.h"

namespace era::score {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

bool is_set(const nlohmann::json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) return !v.get<std::string>().empty();
  return true;
}

std::string error_message(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

// Answers and annotation files come from outside: a FIFO or device given instead is refused by
// name, never read (util/input_file.h).
std::string read_text_file(const std::string& path, const std::string& what) {
  return read_input_file(path, what, uint64_t{16} << 30);
}

size_t AnswerFile::error_records() const {
  size_t n = 0;
  for (const auto& a : records) n += a.is_error;
  return n;
}

std::string AnswerFile::model_id() const {
  for (const auto& a : records)
    if (!a.model_id.empty()) return a.model_id;
  return "";
}

AnswerFile parse_answers(const std::string& text, const std::string& name) {
  AnswerFile file;
  file.path = name;
  std::istringstream in(text);
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = "answers " + name + " line " + std::to_string(number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      fail(where + ": not valid JSON");
    }
    if (!j.is_object()) fail(where + ": expected a JSON object");
    Answer a;
    a.line = number;
    if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("error") &&
        is_set(j["metadata"]["error"])) {
      a.is_error = true;
      a.error = error_message(j["metadata"]["error"]);
    } else if (j.contains("error") && is_set(j["error"])) {
      a.is_error = true;
      a.error = error_message(j["error"]);
    }
    // An error record is skipped and counted whatever its id: era_eval writes "question_id": null
    // for a question line it could not read.
    const bool has_id = j.contains("question_id") && !(a.is_error && j["question_id"].is_null());
    if (has_id) {
      a.question_id = detail::id_string(j["question_id"], where + ": question_id");
      a.question_id_is_number = j["question_id"].is_number();
    } else if (!a.is_error) {
      fail(where + ": no question_id");
    }
    auto get_string = [&](const char* key, std::string& out) {
      if (!j.contains(key) || j[key].is_null()) return false;
      if (!j[key].is_string()) fail(where + ": " + key + " is not a string");
      out = j[key].get<std::string>();
      return true;
    };
    const bool has_text = get_string("text", a.text);
    if (!has_text && !a.is_error) fail(where + ": no text (and not an error record)");
    a.has_prompt = get_string("prompt", a.prompt);
    get_string("model_id", a.model_id);
    file.records.push_back(std::move(a));
  }
  return file;
}

AnswerFile read_answers(const std::string& path) { return parse_answers(read_text_file(path, "answers"), path); }

namespace detail {

std::string id_string(const nlohmann::json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == static_cast<double>(static_cast<long long>(d))) return std::to_string(static_cast<long long>(d));
  }
  throw Error(ErrorCode::kInvalidArgument, where + " must be a string or an integer, got " + v.dump());
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, const KeyFilter& keep) {
  const std::string text = read_text_file(path, what);
  try {
    if (!keep) return nlohmann::json::parse(text);
    // The callback sees each member key before its value; returning false drops that member.
    return nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key) return keep(depth, parsed.get<std::string>());
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    const std::string msg = e.what();
    throw Error(ErrorCode::kInvalidArgument, what + " " + path + ": not valid JSON (" + msg.substr(msg.find(']') + 2) + ")");
  }
}

void for_each_jsonl(const std::string& path, const std::string& what,
                    const std::function<void(const nlohmann::json&, const std::string& where)>& f) {
  std::istringstream in(read_text_file(path, what));
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = what + " " + path + " line " + std::to_string(number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw Error(ErrorCode::kInvalidArgument, where + ": not valid JSON");
    }
    if (!j.is_object()) throw Error(ErrorCode::kInvalidArgument, where + ": expected a JSON object");
    f(j, where);
  }
}

}  // namespace detail
LatestAnswers latest_answers(const AnswerFile& answers, const std::function<bool(const Answer&)>& known) {
  LatestAnswers out;
  for (const auto& a : answers.records) {
    if (a.is_error) {
      ++out.error_records;
      continue;
    }
    if (!known(a)) {
      ++out.unmatched;
      continue;
    }
    auto [it, inserted] = out.by_id.emplace(a.question_id, &a);
    if (inserted) {
      out.order.push_back(a.question_id);
    } else {
      ++out.duplicates;
      it->second = &a;
    }
  }
  return out;
}

}  // namespace era::score
