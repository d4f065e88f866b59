// era_bench_reduction: what ERA's reduction (DEP + BTR) costs next to the prefill it saves.
// For one image and prompt, times the unreduced prefill and, per budget, the reduction and the
// reduced prefill; prints medians as a table (or JSON).
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "era/era.h"
#include "image/clip_preprocess.h"
#include "image/image_io.h"
#include "model/bundle.h"
#include "model/decoder.h"
#include "model/vision_encoder.h"
#include "reduce/method.h"
#include "runtime/sequence.h"
#include "text/prompt.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_ms(int repeats, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int run(const std::string& bundle_dir, const std::string& image, const std::string& method, std::vector<int64_t> budgets,
        int repeats, int threads, bool json) {
  using namespace era;
  if (threads > 0) at::set_num_threads(threads);
  c10::InferenceMode guard;
  ModelBundle bundle = load_bundle(bundle_dir, torch::kCPU);
  const auto& m = bundle.manifest;
  VisionEncoder vision(bundle);
  Decoder decoder(bundle);
  ClipImageConfig cfg;
  cfg.size = static_cast<int>(m.image.size);
  cfg.mean = m.image.mean;
  cfg.std = m.image.std;
  cfg.pad_color = m.image.pad_color;
  const auto pixels = preprocess_llava_pad(load_rgb_image(image), cfg).unsqueeze(0);
  const auto prompt = format_prompt(m.prompt, "What is in the picture?", 1);
  const auto ids = tokenize_with_images(*bundle.tokenizer, prompt, m.prompt.image_placeholder, m.tokens.image_token_id);
  const VisionOutput v = vision.encode(pixels);
  const int64_t n = v.embeddings.size(1);

  auto prefill = [&](const std::vector<ReducedTokens>& images) {
    const auto seq = build_sequence(decoder, ids, m.tokens.image_token_id, images);
    return median_ms(repeats, [&] {
      KvCache cache = decoder.make_cache(1, seq.length());
      decoder.forward(seq.embeds, seq.positions, seq.key_log_bias, cache, true);
    });
  };
  prefill({FullReducer().reduce(v.reduction_input(0, n))});  // warm-up (TorchScript profiling runs)
  const double full_ms = prefill({FullReducer().reduce(v.reduction_input(0, n))});

  nlohmann::json rows = nlohmann::json::array();
  if (!json) {
    std::printf("bundle %s | %lld visual tokens | text hidden %lld x %lld layers | method %s | median of %d\n",
                bundle_dir.c_str(), static_cast<long long>(n), static_cast<long long>(m.text.hidden_size),
                static_cast<long long>(m.text.num_layers), method.c_str(), repeats);
    std::printf("unreduced prefill: %.2f ms (%lld tokens)\n\n", full_ms, static_cast<long long>(ids.size() - 1 + n));
    std::printf("%8s %12s %14s %12s %16s %10s %10s\n", "budget", "reduce ms", "% of prefill", "prefill ms", "prefill speed-up",
                "ideal", "of ideal");
  }
  ReductionOptions options;
  options.method = method;
  const auto reducer = make_reducer(options);
  for (const int64_t k : budgets) {
    ReducedTokens reduced;
    reducer->reduce(v.reduction_input(0, k));  // warm-up
    const double reduce_ms = median_ms(repeats, [&] { reduced = reducer->reduce(v.reduction_input(0, k)); });
    const double pre_ms = prefill({reduced});
    const double text = static_cast<double>(ids.size() - 1);
    const double ideal = (text + n) / (text + k);
    const double speedup = full_ms / pre_ms;
    rows.push_back({{"budget", k}, {"reduce_ms", reduce_ms}, {"reduce_pct_of_prefill", 100.0 * reduce_ms / full_ms},
                    {"prefill_ms", pre_ms}, {"prefill_speedup", speedup}, {"ideal_speedup", ideal}});
    if (!json) {
      std::printf("%8lld %12.3f %13.2f%% %12.2f %15.2fx %9.2fx %9.0f%%\n", static_cast<long long>(k), reduce_ms,
                  100.0 * reduce_ms / full_ms, pre_ms, speedup, ideal, 100.0 * speedup / ideal);
    }
  }
  if (json) {
    std::cout << nlohmann::json{{"bundle", bundle_dir}, {"method", method}, {"visual_tokens", n},
                                {"unreduced_prefill_ms", full_ms}, {"rows", rows}}.dump(1)
              << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bundle, image, method = "era";
  std::vector<int64_t> budgets{32, 64, 128, 192};
  int repeats = 5, threads = 0;
  bool json = false;
  CLI::App app{"era_bench_reduction: reduction cost against the unreduced prefill"};
  app.add_option("-m,--model", bundle, "model bundle")->required();
  app.add_option("-i,--image", image, "image")->required();
  app.add_option("--method", method, "reduction method")->capture_default_str();
  app.add_option("--budgets", budgets, "visual-token budgets")->capture_default_str();
  app.add_option("--repeats", repeats, "timed repetitions (median reported)")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0 = default)");
  app.add_flag("--json", json, "print JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(bundle, image, method, budgets, std::max(1, repeats), threads, json);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "era_bench_reduction: error: %s\n", what.substr(0, what.find('\n')).c_str());
    return 2;
  }
}
