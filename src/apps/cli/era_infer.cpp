// era_infer: images + prompt -> answer (streamed), with timing and token statistics; without -p
// (or with --chat) a conversation read from standard input (src/apps/cli/chat_mode.h).
// Only flag parsing and printing live here; everything else is the library (era/era.h).
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/cli/chat_mode.h"
#include "apps/cli/common_flags.h"
#include "apps/cli/entry.h"
#include "era/debug.h"
#include "era/era.h"
#include "era/reduction_picture.h"
#include "report/result_json.h"
#include "util/npy.h"

namespace {

struct Flags {
  era::cli::ModelFlags model;
  era::cli::GenerationFlags gen;
  std::vector<std::string> images;
  std::vector<std::string> videos;
  int frames = 16;
  double video_fps = 0;
  bool frames_given = false;
  std::string prompt;
  bool prompt_given = false;  // -p on the command line, even empty
  bool stats = false, json = false, no_template = false, chat = false;
  std::string dump_preprocessed, dump_tokens, dump_prompt;
  std::string save_viz, attn_report;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string mib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

struct Summary {
  double min = 0, median = 0, max = 0, mean = 0;
};
template <typename T>
Summary summarize(std::vector<T> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = static_cast<double>(v.front());
  s.max = static_cast<double>(v.back());
  s.median = static_cast<double>(v[v.size() / 2]);
  for (const auto x : v) s.mean += static_cast<double>(x);
  s.mean /= static_cast<double>(v.size());
  return s;
}

void print_stats(const era::ModelInfo& info, const era::Result& r) {
  const auto& s = r.stats;
  const double step = median(s.decode_step_ms);
  std::printf("\n--- era stats ---\n");
  std::printf("model        %s (%s, %s, %s, attention %s, %s vision, %s decoder)\n", info.name.c_str(), info.arch.c_str(),
              info.dtype.c_str(), info.device.c_str(), info.attention.c_str(), info.vision.c_str(), info.decoder.c_str());
  std::printf("tokens       visual %lld | text %lld | prompt %lld | generated %lld (%s)\n",
              static_cast<long long>(s.visual_tokens), static_cast<long long>(s.text_tokens),
              static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens), r.finish_reason.c_str());
  std::printf("preprocess   %8.1f ms\n", s.preprocess_ms);
  std::printf("vision       %8.1f ms  (vision tower + projector)\n", s.vision_ms);
  std::printf("reduce       %8.2f ms\n", s.reduce_ms);
  for (size_t i = 0; i < r.reductions.size(); ++i) {
    const auto& red = r.reductions[i];
    // Newline tokens (kept index -1) stand for no image token: leave them out of the summaries.
    std::vector<int64_t> cluster_sizes;
    std::vector<float> biases;
    for (size_t k = 0; k < red.kept.size(); ++k) {
      if (red.kept[k] < 0) continue;
      cluster_sizes.push_back(red.cluster_sizes[k]);
      biases.push_back(red.bias[k]);
    }
    const auto sizes = summarize(cluster_sizes);
    const auto bias = summarize(biases);
    const auto newlines = std::count(red.kept.begin(), red.kept.end(), int64_t{-1});
    std::printf(
        "  %s %zu    %s: kept %lld of %lld tokens%s | cluster size min %.0f median %.0f max %.0f | b_k min %.3f mean %.3f max "
        "%.3f\n",
        red.media == era::MediaKind::kVideo ? "video" : "image", i, red.method.c_str(),
        static_cast<long long>(red.kept.size() - newlines), static_cast<long long>(red.original_tokens),
        newlines ? (" + " + std::to_string(newlines) + " newlines").c_str() : "", sizes.min, sizes.median, sizes.max, bias.min,
        bias.mean, bias.max);
  }
  std::printf("prefill      %8.1f ms  (%.0f tokens/s)\n", s.prefill_ms,
              s.prefill_ms > 0 ? 1000.0 * s.prompt_tokens / s.prefill_ms : 0.0);
  std::printf("decode       %8.2f ms/token median over %zu steps (%.1f tokens/s)\n", step, s.decode_step_ms.size(),
              step > 0 ? 1000.0 / step : 0.0);
  std::printf("total        %8.1f ms\n", s.total_ms);
  std::printf("kv cache     %s used, %s allocated\n", mib(s.kv_cache_bytes).c_str(), mib(s.kv_cache_allocated_bytes).c_str());
}

void dump_tokens(const std::string& path, const era::PreparedInput& in) {
  nlohmann::json j = {{"prompt", in.prompt}, {"image_token_id", in.image_token_id}, {"ids", in.token_ids}};
  std::vector<int64_t> image_positions, video_positions;
  for (size_t i = 0; i < in.token_ids.size(); ++i) {
    if (in.token_ids[i] == in.image_token_id) image_positions.push_back(static_cast<int64_t>(i));
    if (in.video_token_id >= 0 && in.token_ids[i] == in.video_token_id) video_positions.push_back(static_cast<int64_t>(i));
  }
  j["image_positions"] = image_positions;
  if (in.video_token_id >= 0) {
    j["video_token_id"] = in.video_token_id;
    j["video_positions"] = video_positions;
  }
  std::ofstream out(path);
  if (!(out << j.dump(1) << "\n")) throw era::Error(era::ErrorCode::kInvalidArgument, "cannot write " + path);
}

// The decoder's exact input after reduction and its logits at every prompt position, for an
// outside implementation to reproduce (tests/python/test_hf_lar.py feeds them to transformers).
void dump_prompt(const std::string& dir, era::Session& session, const era::Request& req) {
  const era::debug::PromptTensors p = era::debug::prompt(session, req);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw era::Error(era::ErrorCode::kInvalidArgument, "--dump-prompt: cannot create " + dir + ": " + ec.message());
  const auto file = [&](const char* name) { return (std::filesystem::path(dir) / name).string(); };
  // float32 whatever the model dtype, batch dimension dropped: one request, one sequence
  era::write_npy(file("embeds.npy"), p.embeds[0].to(torch::kCPU, torch::kFloat));
  era::write_npy(file("positions.npy"), p.positions[0].to(torch::kCPU, torch::kLong));
  const torch::Tensor bias = p.key_log_bias[0].to(torch::kCPU, torch::kFloat);
  era::write_npy(file("key_log_bias.npy"), bias);
  era::write_npy(file("layer_scales.npy"), torch::tensor(p.layer_bias_scale, torch::kFloat));
  era::write_npy(file("prompt_logits.npy"), p.logits.to(torch::kCPU, torch::kFloat));
  const nlohmann::ordered_json j = {{"method", req.reduction.method},     {"prompt_tokens", p.embeds.size(1)},
                                    {"visual_tokens", p.visual_tokens},   {"biased_keys", bias.ne(0).sum().item<int64_t>()},
                                    {"hidden_size", p.embeds.size(2)},    {"vocab_size", p.logits.size(-1)},
                                    {"layers", p.layer_bias_scale.size()}};
  std::ofstream out(file("prompt.json"));
  if (!(out << j.dump(1) << "\n")) throw era::Error(era::ErrorCode::kInvalidArgument, "cannot write " + file("prompt.json"));
}

void write_attention_report(const std::string& path, const era::AttentionReport& report) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < report.layers.size(); ++l) {
    const auto& a = report.layers[l];
    layers.push_back(
        {{"layer", l},
         {"share_full", {{"system", a.share_full[0]}, {"visual", a.share_full[1]}, {"instruction", a.share_full[2]}}},
         {"share_reduced", {{"system", a.share_reduced[0]}, {"visual", a.share_reduced[1]}, {"instruction", a.share_reduced[2]}}},
         {"visual_logit_deviation", a.visual_logit_deviation},
         {"group_kl", a.group_kl}});
  }
  const nlohmann::json j = {{"method", report.method},
                            {"visual_tokens_full", report.visual_tokens_full},
                            {"visual_tokens_reduced", report.visual_tokens_reduced},
                            {"layers", layers}};
  std::ofstream out(path);
  if (!(out << j.dump(1) << "\n")) throw era::Error(era::ErrorCode::kInvalidArgument, "cannot write " + path);
}

// The conversation mode: flags that write one answer's files make no sense there.
int run_chat(const Flags& f) {
  const std::pair<const char*, bool> single_answer_only[] = {{"--json", f.json},
                                                             {"--no-template", f.no_template},
                                                             {"--save-viz", !f.save_viz.empty()},
                                                             {"--attn-report", !f.attn_report.empty()},
                                                             {"--dump-preprocessed", !f.dump_preprocessed.empty()},
                                                             {"--dump-tokens", !f.dump_tokens.empty()},
                                                             {"--dump-prompt", !f.dump_prompt.empty()},
                                                             {"--video", !f.videos.empty()}};
  for (const auto& [flag, given] : single_answer_only) {
    if (given)
      throw era::Error(era::ErrorCode::kInvalidArgument, std::string(flag) + " is for one answer: give -p (without --chat)");
  }
  era::cli::ChatOptions o;
  o.base = era::cli::base_request(f.gen);
  era::cli::validate_flags(o.base);  // a bad flag stops before the model loads
  era::Session session = era::Session::open(f.model.model, era::cli::session_options(f.model));
  const era::ModelInfo model = session.info();
  era::cli::validate_flags(o.base, &model);
  o.images = f.images;
  o.first_message = f.prompt;
  o.stats = f.stats;
  o.interactive = ::isatty(STDIN_FILENO) != 0;
  o.print_stats = print_stats;
  return era::cli::run_chat(session, o, std::cin, std::cout);
}

// An image or video error names the file ("PATH: not a supported image"): name the flag that gave
// it as well, as every other refusal of a flag does.
[[noreturn]] void rethrow_naming_the_flag(const era::Error& e, const Flags& f) {
  const std::string what = e.what();
  const auto starts = [&](const std::string& prefix) { return what.rfind(prefix, 0) == 0; };
  for (const auto& path : f.images)
    if (starts(path + ": ")) throw era::Error(e.code(), "-i/--image " + what);
  for (const auto& path : f.videos) {
    if (starts("video " + path + ": ")) throw era::Error(e.code(), "--" + what);  // "--video PATH: ..."
    if (starts(path + ": ")) throw era::Error(e.code(), "--video " + what);
  }
  throw;
}

int answer(const Flags& f, era::Session& session, era::Request& req);  // below

int run(const Flags& f) {
  // -p '' is a mistake, not a request for chat mode (that is -p left out, or --chat)
  if (f.prompt_given && f.prompt.empty() && !f.chat) {
    throw era::Error(era::ErrorCode::kInvalidArgument,
                     "-p/--prompt is empty: give the question (or leave -p out for a conversation read from standard input)");
  }
  if (f.chat || f.prompt.empty()) return run_chat(f);
  era::Request req = era::cli::base_request(f.gen);
  era::cli::validate_flags(req);  // a bad flag stops before the model loads
  era::Session session = era::Session::open(f.model.model, era::cli::session_options(f.model));
  const era::ModelInfo model = session.info();
  era::cli::validate_flags(req, &model);
  req.prompt = f.prompt;
  req.images = f.images;
  req.use_template = !f.no_template;
  try {
    for (const auto& path : f.videos)
      req.videos.push_back(era::Video::from_path(path, f.frames_given ? f.frames : 0, f.video_fps));
    return answer(f, session, req);
  } catch (const era::Error& e) {
    if (e.code() != era::ErrorCode::kImage) throw;
    rethrow_naming_the_flag(e, f);
  }
}

// The one answer -p asks for, with the files the flags ask to write.
int answer(const Flags& f, era::Session& session, era::Request& req) {
  if (!f.attn_report.empty()) write_attention_report(f.attn_report, session.attention_report(req));
  era::PreparedInput in;
  if (!f.dump_preprocessed.empty() || !f.dump_tokens.empty() || !f.save_viz.empty()) {
    era::debug::PreparedTensors prepared = era::debug::prepare(session, req);
    if (!f.dump_preprocessed.empty()) era::write_npy(f.dump_preprocessed, prepared.pixel_values);
    in = std::move(prepared);
    if (!f.dump_tokens.empty()) dump_tokens(f.dump_tokens, in);
  }
  if (!f.dump_prompt.empty()) dump_prompt(f.dump_prompt, session, req);
  if (!f.json) {
    req.on_text = [](const std::string& delta) {
      std::fwrite(delta.data(), 1, delta.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  const era::Result r = session.generate(req);
  const auto info = session.info();
  if (!f.save_viz.empty()) era::save_png(era::draw_request_reduction(in, r, info), f.save_viz);
  if (f.json) {
    nlohmann::ordered_json j;
    j["answer"] = r.text;
    j["tokens"] = r.tokens;
    j["finish_reason"] = r.finish_reason;
    j["model"] = {{"name", info.name}, {"arch", info.arch}, {"dtype", info.dtype}, {"device", info.device}};
    j["stats"] = era::stats_json(r.stats);
    const era::MethodInfo method = era::method_info(req.reduction.method);
    if (method.stage != era::MethodStage::kNone) {
      j["era_options"] = nlohmann::ordered_json::parse(era::era_options_json(era::effective_era_options(req.reduction)));
      if (!method.options.empty())
        j["method_options"] = nlohmann::ordered_json::parse(era::baseline_options_json(req.reduction.baselines));
    }
    j["reductions"] = nlohmann::ordered_json::array();
    for (const auto& red : r.reductions) j["reductions"].push_back(era::reduction_json(red));
    std::cout << j.dump(f.stats ? 1 : -1) << std::endl;
    return 0;
  }
  std::printf("\n");
  if (f.stats) print_stats(info, r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"era_infer: answer a question about images with a LLaVA model bundle (ERA visual-token reduction)"};
  era::cli::add_model_flags(app, f.model);
  app.get_option("--model")->required();
  app.add_option("-i,--image", f.images, "image file; repeat for several images");
  app.add_option("--video", f.videos,
                 "video file (frames sampled uniformly, as lmms-eval) or a folder of frame images (name order); "
                 "repeat for several videos; models with video input (LLaVA-OneVision)");
  auto* frames = app.add_option("--frames", f.frames,
                                "frames sampled from each --video (default 16; a folder's frames are all used unless given)")
                     ->check(CLI::Range(1, era::Video::kMaxFrames));
  era::cli::add_video_fps_flag(app, f.video_fps, frames);
  auto* prompt = app.add_option("-p,--prompt", f.prompt,
                                "question; <image> / <video> mark where images / videos go (default: before the question). "
                                "Without -p: chat mode");
  app.add_flag("--chat", f.chat,
               "a conversation read from standard input (also without -p; -p is then the first message, -i the "
               "first images); /help lists its commands");
  era::cli::add_generation_flags(app, f.gen);
  app.add_flag("--no-template", f.no_template, "send the prompt as is, without the conversation template");
  app.add_option("--save-viz", f.save_viz,
                 "write one PNG picture of the reduction to this file: the images under a light overlay of the "
                 "clusters, kept tokens ringed, dropped ones dimmed, with a legend (LLaVA-NeXT: base crop + stitched tiles)");
  app.add_option("--attn-report", f.attn_report,
                 "write per-layer attention shares, logit deviation and group-KL against the unreduced run (.json)");
  app.add_flag("--stats", f.stats, "print timings, token counts and KV-cache size");
  app.add_flag("--json", f.json, "print one JSON object (answer, tokens, stats) instead of streaming");
  app.add_option("--dump-preprocessed", f.dump_preprocessed, "write the float32 pixel tensor fed to the vision tower (.npy)");
  app.add_option("--dump-tokens", f.dump_tokens, "write the prompt token ids, image placeholders marked (.json)");
  app.add_option("--dump-prompt", f.dump_prompt,
                 "write the decoder's input after reduction (embeds, positions, LAR log b per key, per-layer LAR "
                 "scales) and the logits at every prompt position to this folder (.npy + prompt.json)");
  return era::cli::run_tool("era_infer", app, argc, argv, [&] {
    f.frames_given = frames->count() > 0;
    f.prompt_given = prompt->count() > 0;
    return run(f);
  });
}
