#include "apps/score/mme.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "apps/score/text_util.h"
#include "era/error.h"

namespace era::score {
namespace {

namespace fs = std::filesystem;

const std::string kLlavaSuffix = "Answer the question using a single word or phrase.";
const std::string kMmeSuffix = " Please answer yes or no.";

bool is_in(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

double percent(size_t part, size_t whole) { return whole ? static_cast<double>(part) / static_cast<double>(whole) * 100.0 : 0.0; }

}  // namespace

std::string mme_parse(const std::string& text) {
  const std::string p = py_lower(text);
  if (p == "yes" || p == "no") return p;
  // pred_ans[:4]: the first 4 code points.
  size_t end = 0;
  for (int k = 0; k < 4 && end < p.size(); ++k) end += decode_utf8(p, end).length;
  const std::string prefix = p.substr(0, end);
  if (contains(prefix, "yes")) return "yes";
  if (contains(prefix, "no")) return "no";
  return "other";
}

const std::vector<std::string>& mme_perception_subtasks() {
  static const std::vector<std::string> v = {"existence", "count", "position", "color",   "posters",
                                             "celebrity", "scene", "landmark", "artwork", "OCR"};
  return v;
}

const std::vector<std::string>& mme_cognition_subtasks() {
  static const std::vector<std::string> v = {"commonsense_reasoning", "numerical_calculation", "text_translation",
                                             "code_reasoning"};
  return v;
}

MmeResult mme_scores(const std::vector<MmeItem>& items) {
  struct Image {
    size_t answered = 0, correct = 0;
    bool has_error = false;
  };
  struct Acc {
    MmeSubtask s;
    std::vector<std::string> image_order;
    std::map<std::string, Image> images;
  };
  std::map<std::string, Acc> by_subtask;
  for (const auto& it : items) {
    auto& acc = by_subtask[it.subtask];
    acc.s.name = it.subtask;
    auto [img, inserted] = acc.images.emplace(it.image, Image{});
    if (inserted) acc.image_order.push_back(it.image);
    if (it.is_error) {
      img->second.has_error = true;
      continue;
    }
    const std::string pred = mme_parse(it.prediction);
    const bool correct = pred == it.gold;
    ++acc.s.questions;
    acc.s.correct += correct;
    acc.s.other += pred == "other";
    ++img->second.answered;
    img->second.correct += correct;
  }
  MmeResult r;
  std::vector<std::string> order = mme_perception_subtasks();
  order.insert(order.end(), mme_cognition_subtasks().begin(), mme_cognition_subtasks().end());
  for (const auto& name : order)
    if (!by_subtask.count(name)) r.missing_subtasks.push_back(name);
  for (const auto& [name, acc] : by_subtask)
    if (!is_in(order, name)) order.push_back(name);  // unknown subtasks: after the official ones, sorted
  for (const auto& name : order) {
    const auto found = by_subtask.find(name);
    if (found == by_subtask.end()) continue;
    Acc& acc = found->second;
    for (const auto& key : acc.image_order) {
      const Image& img = acc.images.at(key);
      if (img.has_error) {
        if (img.answered) ++r.incomplete_images;
        continue;
      }
      ++acc.s.images;
      acc.s.images_all_correct += img.correct == img.answered;
    }
    acc.s.acc = percent(acc.s.correct, acc.s.questions);
    acc.s.acc_plus = percent(acc.s.images_all_correct, acc.s.images);
    const double task_score = 0.0 + acc.s.acc + acc.s.acc_plus;
    if (is_in(mme_perception_subtasks(), name)) r.perception += task_score;
    if (is_in(mme_cognition_subtasks(), name)) r.cognition += task_score;
    r.subtasks.push_back(acc.s);
  }
  return r;
}

MmeGroundTruth::MmeGroundTruth(std::string root) : root_(std::move(root)) {
  std::error_code ec;
  if (!fs::is_directory(root_, ec))
    throw Error(ErrorCode::kInvalidArgument,
                "annotations " + root_ + ": not a folder (expected MME_Benchmark_release_version with one folder per subtask)");
}

std::optional<std::string> MmeGroundTruth::lookup(const std::string& subtask, const std::string& txt_name,
                                                  const std::string& question) {
  const auto key = std::make_pair(subtask, txt_name);
  auto it = files_.find(key);
  if (it == files_.end()) {
    std::map<std::string, std::string> qa;
    const fs::path dir = fs::path(root_) / subtask;
    std::error_code ec;
    const fs::path qa_dir = fs::exists(dir / "images", ec) ? dir / "questions_answers_YN" : dir;
    const fs::path file = qa_dir / txt_name;
    if (fs::is_regular_file(file, ec)) {
      std::istringstream in(read_text_file(file.string(), "MME ground truth"));
      std::string line;
      size_t number = 0;
      while (std::getline(in, line)) {
        ++number;
        const std::string stripped = py_strip(line);
        if (stripped.empty()) continue;
        const auto fields = py_split(stripped, "\t");
        if (fields.size() != 2)
          throw Error(ErrorCode::kInvalidArgument,
                      "MME ground truth " + file.string() + " line " + std::to_string(number) + ": expected question<TAB>Yes|No");
        const std::string gold = py_lower(fields[1]);
        if (gold != "yes" && gold != "no")
          throw Error(ErrorCode::kInvalidArgument, "MME ground truth " + file.string() + " line " + std::to_string(number) +
                                                       ": the answer must be Yes or No, got \"" + fields[1] + "\"");
        qa[fields[0]] = gold;
      }
    }
    it = files_.emplace(key, std::move(qa)).first;
  }
  const auto q = it->second.find(question);
  if (q == it->second.end()) return std::nullopt;
  return q->second;
}

std::string mme_question_from_prompt(const std::string& prompt) {
  std::string q = prompt;
  if (contains(q, kLlavaSuffix)) q = py_strip(replace_all(q, kLlavaSuffix, ""));
  if (!contains(q, "Please answer yes or no.")) q += kMmeSuffix;
  return q;
}

MmeResult score_mme(const AnswerFile& answers, MmeGroundTruth& gt) {
  std::vector<MmeItem> items;
  size_t unmatched = 0;
  for (const auto& a : answers.records) {
    MmeItem item;
    item.subtask = py_split(a.question_id, "/").front();
    item.image = a.question_id;
    if (a.is_error) {
      item.is_error = true;
      items.push_back(item);
      continue;
    }
    if (!a.has_prompt)
      throw Error(ErrorCode::kInvalidArgument, "answers " + answers.path + " line " + std::to_string(a.line) +
                                                   ": MME needs the prompt (the ground truth is looked up by question)");
    const std::string base = py_split(py_split(a.question_id, "/").back(), ".").front();
    const std::string txt = base + ".txt";
    std::string question = mme_question_from_prompt(a.prompt);
    auto gold = gt.lookup(item.subtask, txt, question);
    if (!gold && !contains(a.prompt, "Please answer yes or no.")) {
      question = replace_all(question, kMmeSuffix, " " + kMmeSuffix);
      gold = gt.lookup(item.subtask, txt, question);
    }
    if (!gold) {
      ++unmatched;
      continue;
    }
    item.gold = *gold;
    item.prediction = a.text;
    items.push_back(item);
  }
  MmeResult r = mme_scores(items);
  r.unmatched = unmatched;
  r.error_records = answers.error_records();
  return r;
}

}  // namespace era::score
