#include "apps/score/pope.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "apps/score/json_read.h"
#include "apps/score/text_util.h"
#include "era/error.h"

namespace era::score {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

const std::string kPrefix = "coco_pope_", kSuffix = ".json";

bool is_label_file(const std::string& name) {
  return name.size() > kPrefix.size() + kSuffix.size() && name.rfind(kPrefix, 0) == 0 &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

}  // namespace

bool pope_says_yes(const std::string& text) {
  std::string t = text;
  if (const size_t dot = t.find('.'); dot != std::string::npos) t = t.substr(0, dot);
  t = replace_all(t, ",", "");
  for (const auto& w : py_split(t, " "))
    if (w == "No" || w == "not" || w == "no") return false;
  return true;
}

PopeMetrics pope_metrics(const std::vector<bool>& pred_yes, const std::vector<bool>& label_yes) {
  PopeMetrics m;
  const size_t n = std::min(pred_yes.size(), label_yes.size());
  size_t yes = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool p = pred_yes[i], l = label_yes[i];
    yes += p;
    if (p && l) ++m.tp;
    else if (p && !l) ++m.fp;
    else if (!p && !l) ++m.tn;
    else ++m.fn;
  }
  const auto d = [](size_t x) { return static_cast<double>(x); };
  if (m.tp + m.fp) m.precision = d(m.tp) / d(m.tp + m.fp);
  if (m.tp + m.fn) m.recall = d(m.tp) / d(m.tp + m.fn);
  if (m.precision + m.recall > 0) m.f1 = 2 * m.precision * m.recall / (m.precision + m.recall);
  if (n) {
    m.accuracy = d(m.tp + m.tn) / d(n);
    m.yes_ratio = d(yes) / d(n);
  }
  return m;
}

size_t PopeResult::error_records() const {
  size_t n = 0;
  for (const auto& s : splits) n += s.error_records;
  return n;
}

std::unordered_map<std::string, std::string> read_question_categories(const std::string& path) {
  std::unordered_map<std::string, std::string> out;
  detail::for_each_jsonl(path, "questions", [&](const json& j, const std::string& where) {
    if (!j.contains("question_id") || !j.contains("category") || !j["category"].is_string())
      fail(where + ": needs question_id and a string category");
    out[detail::id_string(j["question_id"], where + ": question_id")] = j["category"].get<std::string>();
  });
  return out;
}

std::map<std::string, std::vector<bool>> read_pope_labels(const std::string& path) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_regular_file() && is_label_file(entry.path().filename().string())) files.push_back(entry.path());
    if (files.empty()) fail("annotations " + path + ": no coco_pope_<split>.json label files in this folder");
  } else if (fs::is_regular_file(path, ec)) {
    if (!is_label_file(fs::path(path).filename().string()))
      fail("annotations " + path + ": a POPE label file must be named coco_pope_<split>.json");
    files.push_back(path);
  } else {
    fail("annotations " + path + ": no such file or folder");
  }
  std::map<std::string, std::vector<bool>> out;
  for (const auto& file : files) {
    const std::string name = file.filename().string();
    const std::string split = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    auto& labels = out[split];
    detail::for_each_jsonl(file.string(), "labels", [&](const json& j, const std::string& where) {
      if (!j.contains("label") || !j["label"].is_string()) fail(where + ": no string \"label\"");
      labels.push_back(j["label"].get<std::string>() != "no");
    });
  }
  return out;
}

PopeResult score_pope(const AnswerFile& answers, const std::unordered_map<std::string, std::string>& categories,
                      const std::map<std::string, std::vector<bool>>& labels) {
  PopeResult r;
  std::map<std::string, std::vector<const Answer*>> by_split;
  for (const auto& a : answers.records) {
    const auto c = categories.find(a.question_id);
    if (c == categories.end() || !labels.count(c->second)) {
      ++r.unmatched;
      continue;
    }
    by_split[c->second].push_back(&a);
  }
  double f1_sum = 0, acc_sum = 0;
  size_t with_answers = 0;
  for (const auto& [split, split_labels] : labels) {
    PopeSplit s;
    s.name = split;
    s.labels = split_labels.size();
    std::vector<bool> preds, gold;
    const auto it = by_split.find(split);
    if (it != by_split.end()) {
      s.answers = it->second.size();
      for (size_t i = 0; i < it->second.size() && i < split_labels.size(); ++i) {
        if (it->second[i]->is_error) {
          ++s.error_records;
          continue;
        }
        preds.push_back(pope_says_yes(it->second[i]->text));
        gold.push_back(split_labels[i]);
      }
      for (size_t i = split_labels.size(); i < it->second.size(); ++i) s.error_records += it->second[i]->is_error;
    }
    s.metrics = pope_metrics(preds, gold);
    if (s.metrics.n() > 0) {
      f1_sum += s.metrics.f1;
      acc_sum += s.metrics.accuracy;
      ++with_answers;
    }
    r.splits.push_back(s);
  }
  if (with_answers) {
    r.mean_f1 = f1_sum / static_cast<double>(with_answers);
    r.mean_accuracy = acc_sum / static_cast<double>(with_answers);
  }
  return r;
}

}  // namespace era::score
