#include "apps/eval/runner.h"

#include <algorithm>
#include <filesystem>

#include "apps/eval/answer_file.h"
#include "apps/eval/question_file.h"
#include "apps/eval/records.h"
#include "apps/eval/sharding.h"
#include "era/error.h"
#include "util/error_text.h"

namespace era::eval {
namespace {

namespace fs = std::filesystem;

class SessionBackend : public EvalBackend {
 public:
  explicit SessionBackend(Session session) : session_(std::move(session)), name_(session_.info().name) {}
  std::string model_name() const override { return name_; }
  Result generate(const Request& request) override { return session_.generate(request); }
  std::vector<Result> generate_batch(const std::vector<Request>& requests) override { return session_.generate_batch(requests); }

 private:
  Session session_;
  std::string name_;
};

// A view of a backend that others share (shared_backend).
class SharedView : public EvalBackend {
 public:
  explicit SharedView(std::shared_ptr<EvalBackend> backend) : backend_(std::move(backend)) {}
  std::string model_name() const override { return backend_->model_name(); }
  Result generate(const Request& request) override { return backend_->generate(request); }
  std::vector<Result> generate_batch(const std::vector<Request>& requests) override { return backend_->generate_batch(requests); }

 private:
  std::shared_ptr<EvalBackend> backend_;
};

// metadata.visual_tokens of an answer record, or -1 when it has none.
int64_t visual_tokens_of(const Json& record) {
  const auto meta = record.find("metadata");
  if (meta == record.end() || !meta->is_object()) return -1;
  const auto v = meta->find("visual_tokens");
  return v != meta->end() && v->is_number_integer() ? v->get<int64_t>() : -1;
}

std::string describe(const Question& q) {
  return "question line " + std::to_string(q.line) + " (question_id " + to_line(q.question_id) + ")";
}

// One request's error as the record's message: "<kind>: <what>", e.g. "image error: ...". An
// image or video error names the file only ("DIR/x.png: not a supported image"): the question's
// field that gave it is put in front (the record, and the progress line, name the question).
std::string error_message(const std::exception& e, const EvalConfig& config, const Question& q) {
  const auto* era_error = dynamic_cast<const Error*>(&e);
  if (!era_error) return "internal error: " + first_line(e.what());
  std::string what = first_line(era_error->what());
  if (era_error->code() == ErrorCode::kImage) {
    const auto starts = [&](const std::string& prefix) { return what.rfind(prefix, 0) == 0; };
    const std::string image = (fs::path(config.image_folder) / q.image).string();
    const std::string video = (fs::path(config.image_folder) / q.video).string();
    if (!q.image.empty() && starts(image + ": ")) {
      what = "field \"image\": " + what;
    } else if (!q.video.empty() && (starts("video " + video + ": ") || starts(video + ": "))) {
      what = "field \"video\": " + what;
    }
  }
  return std::string(to_string(era_error->code())) + ": " + what;
}

Request make_request(const EvalConfig& config, const Question& q) {
  Request r = config.request;
  r.on_text = nullptr;
  // model_vqa_loader: DEFAULT_IMAGE_TOKEN + '\n' + qs; a video's placeholder likewise (lmms-eval)
  r.prompt = q.text;
  if (!q.video.empty()) {
    r.prompt = "<video>\n" + r.prompt;
    r.videos = {Video::from_path((fs::path(config.image_folder) / q.video).string(), config.video_frames, config.video_fps)};
  }
  if (!q.image.empty()) {
    r.prompt = "<image>\n" + r.prompt;
    r.images = {(fs::path(config.image_folder) / q.image).string()};
  }
  r.seed = config.request.seed + static_cast<uint64_t>(q.line);
  return r;
}

// The records of one batch of questions, in their order. A batch that throws is redone one
// request at a time so only the failing items become error records.
std::vector<Json> answer_batch(EvalBackend& backend, const EvalConfig& config, const RunSettings& run, AnswerIdGenerator& ids,
                               const std::vector<const Question*>& batch) {
  std::vector<Json> records(batch.size());
  std::vector<size_t> slots;
  std::vector<Request> requests;
  for (size_t k = 0; k < batch.size(); ++k) {
    if (!batch[k]->error.empty()) {
      records[k] = error_record(*batch[k], batch[k]->error);
    } else {
      try {  // a video folder is listed here: a missing one is this question's error record
        requests.push_back(make_request(config, *batch[k]));
        slots.push_back(k);
      } catch (const std::exception& e) {
        records[k] = error_record(*batch[k], error_message(e, config, *batch[k]));
      }
    }
  }
  if (requests.size() > 1) {
    try {
      const std::vector<Result> results = backend.generate_batch(requests);
      if (results.size() != requests.size()) throw Error(ErrorCode::kRuntime, "generate_batch returned a wrong count");
      for (size_t j = 0; j < slots.size(); ++j) {
        records[slots[j]] = answer_record(*batch[slots[j]], results[j], run, ids.next(), static_cast<int64_t>(requests.size()));
      }
      return records;
    } catch (const std::exception&) {
      // fall through: one by one
    }
  }
  for (size_t j = 0; j < slots.size(); ++j) {
    const Question& q = *batch[slots[j]];
    try {
      records[slots[j]] = answer_record(q, backend.generate(requests[j]), run, ids.next(), 1);
    } catch (const std::exception& e) {
      records[slots[j]] = error_record(q, error_message(e, config, q));
    }
  }
  return records;
}

}  // namespace

std::unique_ptr<EvalBackend> session_backend(Session session) { return std::make_unique<SessionBackend>(std::move(session)); }

std::function<std::unique_ptr<EvalBackend>()> shared_backend(std::function<std::unique_ptr<EvalBackend>()> open) {
  auto shared = std::make_shared<std::shared_ptr<EvalBackend>>();
  return [shared, open = std::move(open)]() -> std::unique_ptr<EvalBackend> {
    if (!*shared) *shared = std::shared_ptr<EvalBackend>(open());
    return std::make_unique<SharedView>(*shared);
  };
}

EvalSummary run_eval(const EvalConfig& config, const std::function<std::unique_ptr<EvalBackend>()>& open_backend,
                     const EvalHooks& hooks) {
  const auto message = [&](const std::string& line) {
    if (hooks.on_message) hooks.on_message(line);
  };
  if (config.batch_size < 1) throw Error(ErrorCode::kInvalidArgument, "--batch-size must be >= 1");
  validate_request(config.request);  // a bad setting stops the run before the model loads
  std::error_code ec;
  if (!fs::is_directory(config.image_folder, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "the image folder " + config.image_folder + " is not a folder");
  }
  const std::vector<Question> questions = read_questions(config.questions);
  const ChunkRange range = chunk_range(static_cast<int64_t>(questions.size()), config.num_chunks, config.chunk_idx);
  const std::string chunk_text = "chunk " + std::to_string(config.chunk_idx) + " of " + std::to_string(config.num_chunks) +
                                 " (question lines [" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ") of " +
                                 config.questions + ")";

  const fs::path parent = fs::path(config.answers).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec) && !fs::create_directories(parent, ec)) {
    throw Error(ErrorCode::kInvalidArgument, "cannot create the folder " + parent.string() + ": " + ec.message());
  }
  const AnswersLock run_lock(config.answers);  // shared with the caller's, if it holds one
  AnswerFile out(config.answers);
  EvalSummary summary;
  summary.questions = range.size();
  summary.torn_bytes = out.torn_bytes();
  if (summary.torn_bytes > 0) {
    message("era_eval: removed an incomplete last line (" + std::to_string(summary.torn_bytes) + " bytes) left in " +
            config.answers + " by an interrupted run");
  }

  double visual_token_sum = 0;
  const auto count_visual_tokens = [&](const Json& answer) {
    const int64_t n = visual_tokens_of(answer);
    if (n < 0) return;
    visual_token_sum += static_cast<double>(n);
    ++summary.visual_token_answers;
  };

  // What an earlier run left: answers are kept (their questions skipped), error records dropped.
  std::vector<std::pair<int64_t, std::string>> file_lines;  // (question line, record) in file order
  std::vector<char> done(static_cast<size_t>(range.size()), 0);
  bool rewrite = false;
  const auto& existing = out.existing_lines();
  for (size_t k = 0; k < existing.size(); ++k) {
    const std::string& text = existing[k];
    if (text.find_first_not_of(" \t\r") == std::string::npos) {
      rewrite = true;
      continue;
    }
    const std::string where = config.answers + " line " + std::to_string(k + 1);
    const StoredRecord rec = parse_record(text, where);
    if (!range.contains(rec.line)) {
      throw Error(ErrorCode::kInvalidArgument, where + " is the record of question line " + std::to_string(rec.line) +
                                                   ", which is not in this run's " + chunk_text +
                                                   ": use another --answers file, or the chunking of the run that wrote it");
    }
    char& seen = done[static_cast<size_t>(rec.line - range.begin)];
    if (seen)
      throw Error(ErrorCode::kInvalidArgument, where + ": question line " + std::to_string(rec.line) + " has two records");
    if (rec.is_error) {
      ++summary.retried;
      rewrite = true;
      continue;
    }
    const Question& q = questions[static_cast<size_t>(rec.line)];
    const Json id = rec.json.contains("question_id") ? rec.json["question_id"] : Json();
    if (id != q.question_id) {
      throw Error(ErrorCode::kInvalidArgument, where + " answers question_id " + to_line(id) + " but question line " +
                                                   std::to_string(rec.line) + " of " + config.questions + " is " +
                                                   to_line(q.question_id) + ": the answers are for another question file");
    }
    const Json meta = rec.json.value("metadata", Json::object());
    const Json method = meta.value("method", Json(config.request.reduction.method));
    const Json tokens = meta.value("tokens", Json(config.request.reduction.tokens));
    if (method != Json(config.request.reduction.method) || tokens != Json(config.request.reduction.tokens)) {
      throw Error(ErrorCode::kInvalidArgument, where + " was made with --method " + method.dump() + " --tokens " + tokens.dump() +
                                                   "; this run has --method \"" + config.request.reduction.method +
                                                   "\" --tokens " + std::to_string(config.request.reduction.tokens) +
                                                   ": use another --answers file");
    }
    seen = 1;
    file_lines.emplace_back(rec.line, text);
    count_visual_tokens(rec.json);
  }
  summary.skipped = static_cast<int64_t>(file_lines.size());
  const auto texts = [&](const std::vector<std::pair<int64_t, std::string>>& lines) {
    std::vector<std::string> t;
    t.reserve(lines.size());
    for (const auto& l : lines) t.push_back(l.second);
    return t;
  };
  if (rewrite) out.replace(texts(file_lines));
  if (summary.retried > 0) {
    message("era_eval: trying again " + std::to_string(summary.retried) + " question(s) that failed in an earlier run");
  }

  std::vector<const Question*> todo;
  for (int64_t i = range.begin; i < range.end; ++i) {
    if (!done[static_cast<size_t>(i - range.begin)]) todo.push_back(&questions[static_cast<size_t>(i)]);
  }
  message("era_eval: " + chunk_text + ": " + std::to_string(summary.skipped) + " already answered, " +
          std::to_string(todo.size()) + " to do");

  if (!todo.empty()) {
    std::unique_ptr<EvalBackend> backend = open_backend();
    RunSettings run;
    run.model_id = config.model_id.empty() ? backend->model_name() : config.model_id;
    run.method = config.request.reduction.method;
    run.tokens = config.request.reduction.tokens;
    run.keep_ratio = config.request.reduction.keep_ratio;
    AnswerIdGenerator ids;
    if (hooks.on_start) hooks.on_start(static_cast<int64_t>(todo.size()));
    const auto batch_size = static_cast<size_t>(config.batch_size);
    int64_t processed = 0;
    for (size_t start = 0; start < todo.size(); start += batch_size) {
      if (hooks.stop && hooks.stop->load()) {
        summary.interrupted = true;
        break;
      }
      const std::vector<const Question*> batch(
          todo.begin() + static_cast<std::ptrdiff_t>(start),
          todo.begin() + static_cast<std::ptrdiff_t>(std::min(todo.size(), start + batch_size)));
      const std::vector<Json> records = answer_batch(*backend, config, run, ids, batch);
      for (size_t k = 0; k < batch.size(); ++k) {
        const std::string line = to_line(records[k]);
        out.append(line);
        file_lines.emplace_back(batch[k]->line, line);
        if (records[k].contains("error")) {
          ++summary.errors;
          message("era_eval: " + describe(*batch[k]) + ": " + records[k]["error"].get<std::string>());
        } else {
          ++summary.answered;
          count_visual_tokens(records[k]);
        }
      }
      processed += static_cast<int64_t>(batch.size());
      if (hooks.on_progress) hooks.on_progress(processed, static_cast<int64_t>(todo.size()), summary.errors);
    }
  }

  if (summary.visual_token_answers > 0) {
    summary.visual_tokens_mean = visual_token_sum / static_cast<double>(summary.visual_token_answers);
  }

  // Retried questions were appended after later ones: restore question order (atomically).
  const auto by_line = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(file_lines.begin(), file_lines.end(), by_line)) {
    std::stable_sort(file_lines.begin(), file_lines.end(), by_line);
    out.replace(texts(file_lines));
  }
  return summary;
}

}  // namespace era::eval
