// era_infer: images + prompt -> answer (streamed), with timing and token statistics.
// Only flag parsing and printing live here; everything else is the library (era/era.h).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "era/era.h"
#include "util/npy.h"

namespace {

struct Flags {
  std::string model;
  std::vector<std::string> images;
  std::string prompt;
  int64_t max_new_tokens = 128;
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string dtype;
  int threads = 0;
  int64_t max_image_pixels = 8192LL * 8192;
  bool stats = false, json = false, no_template = false, ignore_eos = false;
  std::string dump_preprocessed, dump_tokens;
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

nlohmann::json stats_json(const era::Stats& s) {
  return {{"preprocess_ms", s.preprocess_ms}, {"vision_ms", s.vision_ms},       {"reduce_ms", s.reduce_ms},
          {"prefill_ms", s.prefill_ms},       {"decode_ms", s.decode_ms},       {"decode_step_ms", s.decode_step_ms},
          {"total_ms", s.total_ms},           {"visual_tokens", s.visual_tokens}, {"text_tokens", s.text_tokens},
          {"prompt_tokens", s.prompt_tokens}, {"generated_tokens", s.generated_tokens},
          {"kv_cache_bytes", s.kv_cache_bytes}, {"kv_cache_allocated_bytes", s.kv_cache_allocated_bytes}};
}

void print_stats(const era::ModelInfo& info, const era::Result& r) {
  const auto& s = r.stats;
  const double step = median(s.decode_step_ms);
  std::printf("\n--- era stats ---\n");
  std::printf("model        %s (%s, %s, %s, attention %s)\n", info.name.c_str(), info.arch.c_str(), info.dtype.c_str(),
              info.device.c_str(), info.attention.c_str());
  std::printf("tokens       visual %lld | text %lld | prompt %lld | generated %lld (%s)\n",
              static_cast<long long>(s.visual_tokens), static_cast<long long>(s.text_tokens),
              static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens), r.finish_reason.c_str());
  std::printf("preprocess   %8.1f ms\n", s.preprocess_ms);
  std::printf("vision       %8.1f ms  (vision tower + projector)\n", s.vision_ms);
  std::printf("reduce       %8.1f ms  (method full)\n", s.reduce_ms);
  std::printf("prefill      %8.1f ms  (%.0f tokens/s)\n", s.prefill_ms,
              s.prefill_ms > 0 ? 1000.0 * s.prompt_tokens / s.prefill_ms : 0.0);
  std::printf("decode       %8.2f ms/token median over %zu steps (%.1f tokens/s)\n", step, s.decode_step_ms.size(),
              step > 0 ? 1000.0 / step : 0.0);
  std::printf("total        %8.1f ms\n", s.total_ms);
  std::printf("kv cache     %s used, %s allocated\n", mib(s.kv_cache_bytes).c_str(), mib(s.kv_cache_allocated_bytes).c_str());
}

void dump_tokens(const std::string& path, const era::PreparedInput& in) {
  nlohmann::json j = {{"prompt", in.prompt}, {"image_token_id", in.image_token_id}, {"ids", in.token_ids}};
  std::vector<int64_t> image_positions;
  for (size_t i = 0; i < in.token_ids.size(); ++i) {
    if (in.token_ids[i] == in.image_token_id) image_positions.push_back(static_cast<int64_t>(i));
  }
  j["image_positions"] = image_positions;
  std::ofstream out(path);
  if (!(out << j.dump(1) << "\n")) throw era::Error(era::ErrorCode::kInvalidArgument, "cannot write " + path);
}

int run(const Flags& f) {
  era::SessionOptions so;
  so.device = f.device;
  so.dtype = f.dtype;
  so.num_threads = f.threads;
  so.max_image_pixels = f.max_image_pixels;
  era::Session session = era::Session::open(f.model, so);

  era::Request req;
  req.prompt = f.prompt;
  req.images = f.images;
  req.use_template = !f.no_template;
  req.max_new_tokens = f.max_new_tokens;
  req.temperature = f.temperature;
  req.top_p = f.top_p;
  req.seed = f.seed;
  req.stop_at_eos = !f.ignore_eos;

  if (!f.dump_preprocessed.empty() || !f.dump_tokens.empty()) {
    const auto in = session.prepare(req);
    if (!f.dump_preprocessed.empty()) era::write_npy(f.dump_preprocessed, in.pixel_values);
    if (!f.dump_tokens.empty()) dump_tokens(f.dump_tokens, in);
  }
  if (!f.json) {
    req.on_text = [](const std::string& delta) {
      std::fwrite(delta.data(), 1, delta.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  const era::Result r = session.generate(req);
  const auto info = session.info();
  if (f.json) {
    nlohmann::json j = {{"answer", r.text},
                        {"tokens", r.tokens},
                        {"finish_reason", r.finish_reason},
                        {"model", {{"name", info.name}, {"arch", info.arch}, {"dtype", info.dtype}, {"device", info.device}}},
                        {"stats", stats_json(r.stats)}};
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
  app.add_option("-m,--model", f.model, "model bundle folder (made by tools/export_llava.py)")->required();
  app.add_option("-i,--image", f.images, "image file; repeat for several images");
  app.add_option("-p,--prompt", f.prompt, "question; <image> marks where images go (default: before the question)")->required();
  app.add_option("-n,--max-new-tokens", f.max_new_tokens, "maximum answer length in tokens")->capture_default_str();
  app.add_option("--temp", f.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  app.add_option("--top-p", f.top_p, "nucleus sampling mass")->capture_default_str();
  app.add_option("--seed", f.seed, "sampling seed")->capture_default_str();
  app.add_option("--device", f.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", f.dtype, "run in float32, float16 or bfloat16 (default: the bundle's)");
  app.add_option("--threads", f.threads, "CPU threads (0 = LibTorch default)")->capture_default_str();
  app.add_option("--max-image-pixels", f.max_image_pixels, "refuse larger images before decoding")->capture_default_str();
  app.add_flag("--stats", f.stats, "print timings, token counts and KV-cache size");
  app.add_flag("--json", f.json, "print one JSON object (answer, tokens, stats) instead of streaming");
  app.add_flag("--no-template", f.no_template, "send the prompt as is, without the conversation template");
  app.add_flag("--ignore-eos", f.ignore_eos, "keep generating past EOS up to --max-new-tokens");
  app.add_option("--dump-preprocessed", f.dump_preprocessed, "write the float32 pixel tensor fed to the vision tower (.npy)");
  app.add_option("--dump-tokens", f.dump_tokens, "write the prompt token ids, image placeholders marked (.json)");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_level(spdlog::level::warn);
  try {
    return run(f);
  } catch (const era::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "era_infer: error: %s\n", e.what());
    return e.code() == era::ErrorCode::kRuntime ? 3 : 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    const std::string what = e.what();
    std::fprintf(stderr, "era_infer: internal error: %s\n", what.substr(0, what.find('\n')).c_str());
    return 4;
  }
}
