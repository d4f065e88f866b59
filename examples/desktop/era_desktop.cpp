// era_desktop: ask a question about a picture in a window; the answer streams in token by token
// and, once it is complete, the picture shows which visual tokens the reduction kept (tinted by
// cluster, dropped patches darkened). Type another question in the window and press Enter; Esc
// cancels a running answer or quits.
//
//   era_desktop --model models/tiny-llava-1.5 --image photo.jpg --question "What is this?"
//               [--method era] [--tokens 64] [--max-new-tokens 64] [--screenshot out.png]
//
// --screenshot renders the final window to a PNG and exits (keeping the window up --hold-ms
// milliseconds longer, so an X screenshot tool can capture it). --help prints the options.
#include <opencv2/highgui.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "answer_canvas.h"
#include "era/era.h"
#include "era/reduction_picture.h"
#include "era/version.h"
#include "key_input.h"

namespace {

constexpr const char* kWindow = "era";

struct Options {
  std::string model, image, question = "What is in the picture?", method = "era", screenshot;
  int64_t tokens = 64, max_new_tokens = 64;
  int hold_ms = 0;
};

constexpr const char* kUsage =
    "usage: era_desktop --model BUNDLE --image FILE [--question TEXT] [--method M] [--tokens K]\n"
    "                   [--max-new-tokens N] [--screenshot OUT.png [--hold-ms MS]]\n"
    "Asks about the picture in a window; the answer streams in, then the reduction is drawn over the\n"
    "picture. Type another question and press Enter; Esc cancels an answer, or quits.\n"
    "  --model BUNDLE       an era bundle (tools/demo.sh makes models/tiny-llava-1.5)\n"
    "  --image FILE         the picture\n"
    "  --question TEXT      the first question (default: What is in the picture?)\n"
    "  --method M           reduction method (default era; full keeps every token)\n"
    "  --tokens K           visual tokens kept (default 64)\n"
    "  --max-new-tokens N   answer length limit (default 64)\n"
    "  --screenshot FILE    write the window after the first answer as a PNG and exit\n"
    "  --hold-ms MS         with --screenshot: keep the window up this long first\n"
    "  --version            print the era version and exit\n";

// Options, or nullopt when --help or --version was asked for (printed).
std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return std::nullopt;
    }
    if (flag == "--version") {
      std::cout << "era_desktop " << era::version_string() << "\n";
      return std::nullopt;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw era::Error(era::ErrorCode::kInvalidArgument, flag + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> int64_t {
      const std::string v = value();
      try {
        return std::stoll(v);
      } catch (const std::exception&) {
        throw era::Error(era::ErrorCode::kInvalidArgument, flag + ": not a number: " + v);
      }
    };
    if (flag == "--model") o.model = value();
    else if (flag == "--image") o.image = value();
    else if (flag == "--question") o.question = value();
    else if (flag == "--method") o.method = value();
    else if (flag == "--tokens") o.tokens = number();
    else if (flag == "--max-new-tokens") o.max_new_tokens = number();
    else if (flag == "--screenshot") o.screenshot = value();
    else if (flag == "--hold-ms") o.hold_ms = static_cast<int>(number());
    else throw era::Error(era::ErrorCode::kInvalidArgument, "unknown option " + flag + " (see --help)");
  }
  if (o.model.empty() || o.image.empty())
    throw era::Error(era::ErrorCode::kInvalidArgument, "--model and --image are required (see --help)");
  return o;
}

// The base crop's slice of an image's reduction (all of it for LLaVA-1.5).
era::ImageReduction crop_of(const era::ImageReduction& reduction, int64_t tokens_per_crop) {
  era::ImageReduction crop;
  crop.assignment.assign(reduction.assignment.begin(), reduction.assignment.begin() + tokens_per_crop);
  for (const int64_t k : reduction.kept) {
    if (k >= 0 && k < tokens_per_crop) crop.kept.push_back(k);
  }
  return crop;
}

// The base crop as the vision tower saw it, with the reduction drawn over it when there is one.
cv::Mat picture_of(const era::PreparedInput& in, const era::ImageReduction* reduction, int64_t tokens_per_crop) {
  const int64_t grid = std::lround(std::sqrt(static_cast<double>(tokens_per_crop)));
  // era::Image pixels are tightly packed RGB rows.
  const era::Image rgb =
      reduction ? era::draw_reduction(in.crops[0], grid, crop_of(*reduction, tokens_per_crop), /*scale=*/1) : in.crops[0];
  cv::Mat view(rgb.height(), rgb.width(), CV_8UC3, const_cast<uint8_t*>(rgb.data()));
  cv::Mat bgr;
  cv::cvtColor(view, bgr, cv::COLOR_RGB2BGR);
  return bgr;
}

class DesktopApp {
 public:
  DesktopApp(era::Session& session, const Options& options, const era::Image& image)
      : session_(session), options_(options), image_(image) {}

  // One question: stream the answer into the window, then draw the reduction.
  void ask(const std::string& question) {
    era::Request request;
    request.image_buffers = {image_};
    request.prompt = question;
    request.max_new_tokens = options_.max_new_tokens;
    request.reduction.method = options_.method;
    request.reduction.tokens = era::method_info(options_.method).stage == era::MethodStage::kNone ? 0 : options_.tokens;
    const auto info = session_.info();
    const era::PreparedInput in = session_.prepare(request);

    state_.picture = picture_of(in, nullptr, info.tokens_per_crop);
    state_.question = question;
    state_.answer.clear();
    state_.status = "answering... (Esc cancels)";
    show();
    int pieces = 0;
    bool cancelled = false;
    request.on_text = [&](const std::string& piece) {
      state_.answer += piece;
      state_.status = "answering... " + std::to_string(++pieces) + " pieces (Esc cancels)";
      // Keys typed meanwhile go into the next question (Enter queues it); Esc cancels this one.
      const KeyAction action = show_and_read_key();
      if (action == KeyAction::kEscape) cancelled = true;
      if (action == KeyAction::kSubmit) submit_typed();
      return !cancelled;
    };
    const era::Result result = session_.generate(request);
    state_.answer = result.text;
    if (!result.reductions.empty()) state_.picture = picture_of(in, &result.reductions[0], info.tokens_per_crop);
    state_.status = options_.method + ": " + std::to_string(result.stats.visual_tokens) + " visual tokens, " +
                    std::to_string(result.stats.generated_tokens) + " generated (" + result.finish_reason + ", " +
                    std::to_string(static_cast<int>(result.stats.total_ms)) + " ms). Type a question + Enter; Esc quits.";
    show();
  }

  // Reads typed questions until Esc or the window is closed.
  void interact() {
    while (true) {
      while (!queued_.empty()) {
        const std::string q = queued_.front();
        queued_.erase(queued_.begin());
        ask_safely(q);
      }
      const KeyAction action = read_key(50);
      // 0 = the window was closed (-1 where the GUI backend cannot tell: keep going, Esc quits).
      if (action == KeyAction::kEscape || cv::getWindowProperty(kWindow, cv::WND_PROP_VISIBLE) == 0) return;
      if (action == KeyAction::kSubmit) submit_typed();
      if (action == KeyAction::kEdited) show_and_read_key();
    }
  }

  // ask(), with request errors (e.g. a question too long for the context) shown in the window.
  void ask_safely(const std::string& question) {
    try {
      ask(question);
    } catch (const era::Error& e) {
      state_.status = std::string("error (") + era::to_string(e.code()) + "): " + e.what();
      show();
    }
  }

  void save(const std::string& path) const {
    if (!cv::imwrite(path, render_canvas(state_))) throw era::Error(era::ErrorCode::kInvalidArgument, "cannot write " + path);
  }

 private:
  // Redraws the window and lets the GUI process events, applying any key pressed meanwhile: every
  // waitKey is read through apply_key, so no key is lost between redraws.
  KeyAction show_and_read_key() {
    cv::imshow(kWindow, render_canvas(state_));
    return read_key(1);
  }
  void show() { show_and_read_key(); }

  // waitKeyEx, not waitKey: waitKey keeps the low byte only (no Shift state, no non-ASCII keysym).
  KeyAction read_key(int wait_ms) {
    const KeyAction action = apply_key(cv::waitKeyEx(wait_ms), state_.typing);
    if (action == KeyAction::kEdited) cv::imshow(kWindow, render_canvas(state_));
    return action;
  }

  void submit_typed() {
    if (state_.typing.empty()) return;
    queued_.push_back(state_.typing);
    state_.typing.clear();
  }

  std::vector<std::string> queued_;  // questions submitted (Enter) and not yet asked

  era::Session& session_;
  Options options_;
  era::Image image_;
  CanvasState state_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<Options> parsed = parse(argc, argv);
    if (!parsed) return 0;  // --help
    const Options& options = *parsed;
    // The picture goes to the library as pixels (the in-memory path an app with its own images
    // uses); a file that OpenCV cannot read is reported like the library would.
    const cv::Mat bgr = cv::imread(options.image, cv::IMREAD_COLOR);
    if (bgr.empty()) throw era::Error(era::ErrorCode::kImage, options.image + ": cannot read image");
    const era::Image image =
        era::Image::from_pixels(bgr.data, bgr.cols, bgr.rows, static_cast<int>(bgr.step), era::PixelFormat::kBGR8);
    era::Session session = era::Session::open(options.model);

    cv::namedWindow(kWindow, cv::WINDOW_AUTOSIZE | cv::WINDOW_GUI_NORMAL);
    DesktopApp app(session, options, image);
    app.ask(options.question);
    if (!options.screenshot.empty()) {
      app.save(options.screenshot);
      std::cout << "era_desktop: wrote " << options.screenshot << std::endl;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.hold_ms);
      while (std::chrono::steady_clock::now() < until) cv::waitKey(20);  // keep painting for X screenshots
      return 0;
    }
    app.interact();
    return 0;
  } catch (const era::Error& e) {
    std::cerr << "era_desktop: error: " << e.what() << "\n";
    return 2;
  } catch (const cv::Exception& e) {
    std::cerr << "era_desktop: error: window system: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {  // the tools' exit code for a bug (README, "Exit codes")
    std::cerr << "era_desktop: internal error: " << e.what() << "\n";
    return 4;
  }
}
