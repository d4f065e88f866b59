#pragma once
// The batch evaluation run behind era_eval: questions in, one answer (or error) record per
// question out, the way LLaVA's model_vqa_loader does it, made restartable.
//
//  - Prompt: "<image>\n" + the question's text, wrapped in the bundle's template (vicuna_v1), the
//    image read from image_folder / image. Greedy unless the request samples; the seed of the
//    question at line i is request.seed + i, so answers do not depend on chunking, batching or
//    resuming.
//  - Sharding: chunk chunk_idx of num_chunks, LLaVA's split (eval/sharding.h).
//  - Resume: the answers file is an append-only log (eval/answer_file.h). Records already there
//    for this chunk are kept and their questions skipped; old error records are removed and their
//    questions tried again. The key is the question's line index, never question_id.
//  - Bad items: a malformed question line or a failing request (missing or corrupt image, prompt
//    too long, ...) becomes an error record and the run goes on. A batch that throws is redone one
//    request at a time so only the bad item fails.
// At the end the file holds the chunk's records in question order.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "era/era.h"

namespace era::eval {

// What the runner needs from a model: era::Session, or a stand-in in tests.
class EvalBackend {
 public:
  virtual ~EvalBackend() = default;
  virtual std::string model_name() const = 0;
  virtual Result generate(const Request& request) = 0;
  virtual std::vector<Result> generate_batch(const std::vector<Request>& requests) = 0;
};

std::unique_ptr<EvalBackend> session_backend(Session session);

// For several runs over one model: every call of the returned function hands out a view of the
// same backend, which `open` makes on the first call only (so a set of runs with nothing left to
// do never loads the model, and one that has loads it once). Views stay usable as long as any
// exists.
std::function<std::unique_ptr<EvalBackend>()> shared_backend(std::function<std::unique_ptr<EvalBackend>()> open);

struct EvalConfig {
  std::string questions;  // question JSONL
  std::string image_folder;
  std::string answers;   // answers JSONL (created, or resumed)
  std::string model_id;  // "" = the model's name
  int64_t num_chunks = 1, chunk_idx = 0;
  int64_t batch_size = 1;
  int video_frames = 0;  // frames per question video (era::Video::from_path; 0 = its default)
  double video_fps = 0;  // sampling rate per question video instead (era::Video::from_path)
  // Generation and reduction settings shared by every question; prompt, images, seed and on_text
  // are set per question.
  Request request;
};

struct EvalSummary {
  int64_t questions = 0;     // in this chunk
  int64_t answered = 0;      // answers written by this run
  int64_t skipped = 0;       // answered by an earlier run
  int64_t errors = 0;        // error records written by this run
  int64_t retried = 0;       // earlier error records removed to try again
  int64_t torn_bytes = 0;    // incomplete last line cut from the answers file
  bool interrupted = false;  // stopped early by `stop`
  // The real visual tokens the decoder saw (metadata.visual_tokens), over every answer of the chunk
  // now in the file, earlier runs' included: how many answers carry the count, and its mean.
  int64_t visual_token_answers = 0;
  double visual_tokens_mean = 0;
};

struct EvalHooks {
  std::function<void(int64_t todo)> on_start;  // the model is loaded, `todo` questions to answer
  std::function<void(int64_t done, int64_t total, int64_t errors)> on_progress;  // after each batch
  std::function<void(const std::string& line)> on_message;                       // notes, item errors
  const std::atomic<bool>* stop = nullptr;                                       // checked between batches
};

// Runs (or resumes) the evaluation. `open_backend` is called only if some question is left to do.
// Throws era::Error for problems that stop the whole run: unreadable question file, an answers
// file that belongs to another run or chunk, a model that does not load, a write failure.
EvalSummary run_eval(const EvalConfig& config, const std::function<std::unique_ptr<EvalBackend>()>& open_backend,
                     const EvalHooks& hooks = {});

}  // namespace era::eval
