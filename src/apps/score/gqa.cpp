#include "apps/score/gqa.h"

#include <map>

#include "apps/score/json_read.h"
#include "apps/score/text_util.h"
#include "era/error.h"

namespace era::score {

std::unordered_map<std::string, GqaQuestion> read_gqa_questions(const std::string& path) {
  // depth 1: question ids; depth 2: their fields; depth 3: the members of "types".
  const auto keep = [](int depth, const std::string& key) {
    if (depth == 1) return true;
    if (depth == 2) return key == "answer" || key == "isBalanced" || key == "types";
    return depth == 3 && key == "structural";
  };
  const auto j = detail::read_json_file(path, "annotations", keep);
  if (!j.is_object())
    throw Error(ErrorCode::kInvalidArgument,
                "annotations " + path + ": expected GQA's {question_id: {\"answer\": ...}} (testdev_balanced_questions.json)");
  std::unordered_map<std::string, GqaQuestion> out;
  for (const auto& [qid, q] : j.items()) {
    if (!q.is_object() || !q.contains("answer") || !q["answer"].is_string())
      throw Error(ErrorCode::kInvalidArgument, "annotations " + path + " question " + qid + ": no string \"answer\"");
    GqaQuestion g;
    g.answer = q["answer"].get<std::string>();
    if (q.contains("isBalanced") && q["isBalanced"].is_boolean()) g.balanced = q["isBalanced"].get<bool>();
    if (q.contains("types") && q["types"].is_object() && q["types"].contains("structural") &&
        q["types"]["structural"].is_string())
      g.structural = q["types"]["structural"].get<std::string>();
    out.emplace(qid, std::move(g));
  }
  return out;
}

std::string gqa_prediction(const std::string& text) { return py_lower(py_rstrip(text, ".")); }

GqaResult score_gqa(const AnswerFile& answers, const std::unordered_map<std::string, GqaQuestion>& questions) {
  GqaResult r;
  const LatestAnswers latest = latest_answers(answers, [&](const Answer& a) { return questions.count(a.question_id) > 0; });
  r.error_records = latest.error_records;
  r.unmatched = latest.unmatched;
  r.duplicates = latest.duplicates;
  std::map<std::string, GqaResult::Group> groups;
  for (const auto& qid : latest.order) {
    const GqaQuestion& q = questions.at(qid);
    if (!q.balanced) {
      ++r.unbalanced;
      continue;
    }
    const bool correct = gqa_prediction(latest.by_id.at(qid)->text) == q.answer;
    ++r.scored;
    r.correct += correct;
    if (!q.structural.empty()) {
      auto& g = groups[q.structural];
      g.name = q.structural;
      ++g.questions;
      g.correct += correct;
    }
  }
  size_t balanced = 0;
  for (const auto& [qid, q] : questions) balanced += q.balanced;
  r.missing = balanced - r.scored;
  r.accuracy = r.scored ? static_cast<double>(r.correct) / static_cast<double>(r.scored) * 100.0 : 0.0;
  for (auto& [name, g] : groups) {
    g.accuracy = static_cast<double>(g.correct) / static_cast<double>(g.questions) * 100.0;
    r.by_structural.push_back(g);
  }
  return r;
}

}  // namespace era::score
