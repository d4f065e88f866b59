// Built against an installed era (CMake package or pkg-config): answers one question about an
// image given as a file and as in-memory pixels, and checks the two answers agree.
//   consumer BUNDLE IMAGE
#include <era/era.h>

#include <opencv2/imgcodecs.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consumer BUNDLE IMAGE\n";
    return 2;
  }
  static_assert(ERA_VERSION >= 100, "era/version.h is generated from the project version");
  try {
    era::Session session = era::Session::open(argv[1]);
    era::Request request;
    request.prompt = "What is shown in this image?";
    request.max_new_tokens = 8;
    request.stop_at_eos = false;
    request.reduction.method = "era";
    request.reduction.tokens = 32;
    request.images = {argv[2]};
    const era::Result from_file = session.generate(request);

    const cv::Mat bgr = cv::imread(argv[2], cv::IMREAD_COLOR);
    request.images.clear();
    request.image_buffers = {
        era::Image::from_pixels(bgr.data, bgr.cols, bgr.rows, static_cast<int>(bgr.step), era::PixelFormat::kBGR8)};
    const era::Result from_pixels = session.generate(request);

    std::cout << "version " << era::version_string() << " headers " << ERA_VERSION_STRING << "\n";
    std::cout << "shim " << session.info().tokenizer_shim << "\n";
    std::cout << "tokens " << from_file.tokens.size() << " visual " << from_file.stats.visual_tokens << "\n";
    std::cout << "answer " << from_file.text << "\n";
    if (from_file.tokens != from_pixels.tokens) {
      std::cerr << "consumer: the pixel buffer's answer differs from the file's\n";
      return 1;
    }
    try {
      request.image_buffers = {era::Image::from_file("/no/such/image.png")};
      session.generate(request);
      std::cerr << "consumer: a missing image did not throw\n";
      return 1;
    } catch (const era::Error& e) {
      std::cout << "error " << era::to_string(e.code()) << "\n";
    }
    return 0;
  } catch (const era::Error& e) {
    std::cerr << "consumer: error (" << era::to_string(e.code()) << "): " << e.what() << "\n";
    return 2;
  }
}
