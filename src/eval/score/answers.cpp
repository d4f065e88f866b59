#include "eval/score/answers.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "era/error.h"
#include "eval/score/json_read.h"

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

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(what + " " + path + ": cannot open (missing or unreadable)");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(what + " " + path + ": read error");
  return ss.str();
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

RunInfo AnswerFile::run_info() const {
  RunInfo info;
  const Answer* first = nullptr;  // the first record that names its run
  double sum = 0;
  for (const auto& a : records) {
    if (a.method.empty()) continue;
    if (!first) {
      first = &a;
    } else if (a.method != first->method || a.tokens != first->tokens || a.keep_ratio != first->keep_ratio) {
      const auto run = [](const Answer& r) { return "method " + r.method + " tokens " + std::to_string(r.tokens); };
      fail("answers " + path + ": line " + std::to_string(first->line) + " is from " + run(*first) + " but line " +
           std::to_string(a.line) + " from " + run(a) + ": score each run's answers file on its own");
    }
    if (!a.is_error && a.visual_tokens >= 0) {
      sum += static_cast<double>(a.visual_tokens);
      ++info.visual_token_answers;
    }
  }
  if (first) {
    info.method = first->method;
    info.tokens = std::max<int64_t>(first->tokens, 0);
    info.keep_ratio = first->keep_ratio;
  }
  if (info.visual_token_answers > 0) info.visual_tokens_mean = sum / static_cast<double>(info.visual_token_answers);
  return info;
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
    } catch (const nlohmann::json::parse_error&) {
      fail(where + ": not valid JSON");
    }
    if (!j.is_object()) fail(where + ": expected a JSON object");
    if (!j.contains("question_id")) fail(where + ": no question_id");
    Answer a;
    a.line = number;
    a.question_id = detail::id_string(j["question_id"], where + ": question_id");
    a.question_id_is_number = j["question_id"].is_number();
    if (j.contains("metadata") && j["metadata"].is_object() && j["metadata"].contains("error") &&
        is_set(j["metadata"]["error"])) {
      a.is_error = true;
      a.error = error_message(j["metadata"]["error"]);
    } else if (j.contains("error") && is_set(j["error"])) {
      a.is_error = true;
      a.error = error_message(j["error"]);
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
    if (j.contains("metadata") && j["metadata"].is_object()) {
      const auto& meta = j["metadata"];
      if (meta.contains("method") && meta["method"].is_string()) a.method = meta["method"].get<std::string>();
      if (meta.contains("tokens") && meta["tokens"].is_number_integer()) a.tokens = meta["tokens"].get<int64_t>();
      if (meta.contains("keep_ratio") && meta["keep_ratio"].is_number()) a.keep_ratio = meta["keep_ratio"].get<double>();
      if (meta.contains("visual_tokens") && meta["visual_tokens"].is_number_integer())
        a.visual_tokens = meta["visual_tokens"].get<int64_t>();
    }
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
  } catch (const nlohmann::json::parse_error& e) {
    const std::string msg = e.what();
    throw Error(ErrorCode::kInvalidArgument, what + " " + path + ": not valid JSON (" + msg.substr(msg.find(']') + 2) + ")");
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
