#include "eval/score/video_choice.h"

#include <fstream>

#include "era/error.h"
#include "eval/score/json_read.h"
#include "eval/score/text_util.h"

namespace era::score {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

const std::vector<std::string>& prefixes(VideoChoiceBenchmark b) {
  // Video-MME's list as lmms-eval runs it: two pairs lack a comma and are one string each.
  static const std::vector<std::string> videomme = {
      "The best answer is", "The correct answer is", "The answer is", "The answer",
      "The best option isThe correct option is", "Best answer:Best option:"};
  static const std::vector<std::string> longvideobench = {
      "The best answer is", "The correct answer is", "The answer is", "The answer",
      "The best option is", "The correct option is", "Best answer:", "Best option:"};
  return b == VideoChoiceBenchmark::kVideoMme ? videomme : longvideobench;
}

std::string letters(VideoChoiceBenchmark b) { return b == VideoChoiceBenchmark::kVideoMme ? "ABCD" : "ABCDE"; }

std::string benchmark_name(VideoChoiceBenchmark b) {
  return b == VideoChoiceBenchmark::kVideoMme ? "Video-MME" : "LongVideoBench";
}

std::string text_field(const json& row, const char* key, const std::string& where, bool required) {
  if (!row.contains(key) || row[key].is_null()) {
    if (required) fail(where + ": no \"" + key + "\"");
    return "";
  }
  if (row[key].is_string()) return row[key].get<std::string>();
  if (row[key].is_number_integer()) return std::to_string(row[key].get<long long>());
  fail(where + ": \"" + key + "\" must be a string");
}

// A JSON list of rows, or JSON Lines.
std::vector<json> read_rows(const std::string& path) {
  const std::string text = read_text_file(path, "annotations");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    const json all = detail::read_json_file(path, "annotations");
    return std::vector<json>(all.begin(), all.end());
  }
  std::vector<json> rows;
  detail::for_each_jsonl(path, "annotations", [&](const json& row, const std::string&) { rows.push_back(row); });
  return rows;
}

}  // namespace

std::string video_choice_letter(const std::string& answer, VideoChoiceBenchmark benchmark) {
  std::string s = py_strip(answer);
  for (const std::string& p : prefixes(benchmark)) s = replace_all(s, p, "");
  const std::string options = letters(benchmark);
  const size_t at = s.find_first_of(options);
  if (py_split(s).size() > 10 && at == std::string::npos) return "";
  return at == std::string::npos ? "" : std::string(1, s[at]);
}

std::unordered_map<std::string, VideoChoiceQuestion> read_video_choice_annotations(const std::string& path,
                                                                                  VideoChoiceBenchmark benchmark) {
  const bool videomme = benchmark == VideoChoiceBenchmark::kVideoMme;
  std::unordered_map<std::string, VideoChoiceQuestion> out;
  const std::vector<json> rows = read_rows(path);
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string where = "annotations " + path + " row " + std::to_string(i + 1);
    if (!row.is_object()) fail(where + ": expected an object (a " + benchmark_name(benchmark) + " row)");
    VideoChoiceQuestion q;
    std::string id;
    if (videomme) {
      id = text_field(row, "question_id", where, true);
      q.answer = text_field(row, "answer", where, true);
      if (q.answer.size() != 1 || letters(benchmark).find(q.answer) == std::string::npos)
        fail(where + ": \"answer\" must be one of A, B, C, D, got \"" + q.answer + "\"");
      for (const char* kind : {"duration", "domain", "task_type"}) {
        const std::string v = text_field(row, kind, where, false);
        if (!v.empty()) q.groups.emplace_back(kind, v);
      }
    } else {
      id = text_field(row, "id", where, true);
      if (!row.contains("correct_choice") || !row["correct_choice"].is_number_integer())
        fail(where + ": no integer \"correct_choice\"");
      const long long c = row["correct_choice"].get<long long>();
      if (c < 0 || c > 4) fail(where + ": \"correct_choice\" must be 0..4, got " + std::to_string(c));
      q.answer = std::string(1, static_cast<char>('A' + c));
      for (const char* kind : {"duration_group", "question_category"}) {
        const std::string v = text_field(row, kind, where, false);
        if (!v.empty()) q.groups.emplace_back(kind, v);
      }
    }
    if (!out.emplace(id, q).second) fail(where + ": question id \"" + id + "\" appears twice");
  }
  if (out.empty()) fail("annotations " + path + ": no " + benchmark_name(benchmark) + " rows");
  return out;
}

VideoChoiceResult score_video_choice(const AnswerFile& answers,
                                     const std::unordered_map<std::string, VideoChoiceQuestion>& questions,
                                     VideoChoiceBenchmark benchmark) {
  VideoChoiceResult r;
  const LatestAnswers latest = latest_answers(answers, [&](const Answer& a) { return questions.count(a.question_id) > 0; });
  r.error_records = latest.error_records;
  r.unmatched = latest.unmatched;
  r.duplicates = latest.duplicates;
  for (const auto& id : latest.order) {
    const VideoChoiceQuestion& q = questions.at(id);
    const std::string letter = video_choice_letter(latest.by_id.at(id)->text, benchmark);
    const bool correct = letter == q.answer;
    ++r.total;
    r.correct += correct;
    r.unparsed += letter.empty();
    for (const auto& [kind, value] : q.groups) {
      auto& g = r.by_group[kind + ": " + value];
      ++g.first;
      g.second += correct;
    }
  }
  r.missing = questions.size() - latest.by_id.size();
  r.accuracy = r.total ? 100.0 * static_cast<double>(r.correct) / static_cast<double>(r.total) : 0.0;
  return r;
}

}  // namespace era::score
