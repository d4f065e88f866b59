#include "apps/eval/merge.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "apps/eval/answer_file.h"
#include "apps/eval/records.h"
#include "era/error.h"
#include "util/input_file.h"

namespace era::eval {
namespace {

// A chunk's answers file; a FIFO or device in its place is refused, never waited on.
std::string read_whole(const std::string& path) { return read_input_file(path, "answers file", uint64_t{16} << 30); }

struct Source {
  std::string file;
  int64_t file_line = 0;  // 1-based
  std::string text;
  bool is_error = false;
};

}  // namespace

MergeSummary merge_answer_files(const std::vector<std::string>& inputs, const std::string& output, const MergeOptions& options) {
  if (inputs.empty()) throw Error(ErrorCode::kInvalidArgument, "merge: no input files");
  std::map<int64_t, Source> by_line;
  for (const auto& file : inputs) {
    const std::string content = read_whole(file);
    if (!content.empty() && content.back() != '\n') {
      throw Error(ErrorCode::kInvalidArgument,
                  file +
                      " ends with an incomplete line (its run was killed while writing): rerun that chunk with the "
                      "same command (it resumes and repairs the file), then merge");
    }
    std::istringstream lines(content);
    std::string text;
    int64_t file_line = 0;
    while (std::getline(lines, text)) {
      ++file_line;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = file + " line " + std::to_string(file_line);
      const StoredRecord rec = parse_record(text, where);
      const auto [it, inserted] = by_line.emplace(rec.line, Source{file, file_line, text, rec.is_error});
      if (!inserted) {
        throw Error(ErrorCode::kInvalidArgument,
                    "question line " + std::to_string(rec.line) + " is answered twice: " + it->second.file + " line " +
                        std::to_string(it->second.file_line) + " and " + where + " (overlapping chunks, or a file given twice?)");
      }
    }
  }
  const int64_t expected =
      options.expected_questions >= 0 ? options.expected_questions : (by_line.empty() ? 0 : by_line.rbegin()->first + 1);
  if (!by_line.empty() && by_line.rbegin()->first >= expected) {
    throw Error(ErrorCode::kInvalidArgument, "question line " + std::to_string(by_line.rbegin()->first) +
                                                 " has a record but the question file has only " + std::to_string(expected) +
                                                 " questions");
  }
  // Every key is in [0, expected) now, so the gaps are expected - size; list the first few.
  const int64_t missing_count = expected - static_cast<int64_t>(by_line.size());
  if (missing_count > 0) {
    std::string list;
    int listed = 0;
    int64_t next = 0;
    for (auto it = by_line.begin(); listed < 10 && next < expected; ++next) {
      if (it != by_line.end() && it->first == next) {
        ++it;
        continue;
      }
      list += (listed++ ? ", " : "") + std::to_string(next);
    }
    if (missing_count > listed) list += ", ...";
    throw Error(ErrorCode::kInvalidArgument, std::to_string(missing_count) + " of " + std::to_string(expected) +
                                                 " question line(s) have no record: " + list +
                                                 " (a chunk missing or unfinished? rerun it, it resumes)");
  }
  MergeSummary summary;
  std::vector<std::string> out;
  out.reserve(by_line.size());
  for (const auto& [line, src] : by_line) {
    (src.is_error ? summary.errors : summary.answers)++;
    if (src.is_error && options.drop_errors) continue;
    out.push_back(src.text);
  }
  summary.records = static_cast<int64_t>(out.size());
  write_lines_atomically(output, out);
  return summary;
}

}  // namespace era::eval
