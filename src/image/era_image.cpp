// era::Image (era/image.h): the public image type, implemented on OpenCV like the rest of the image stage.
#include "era/image.h"

#include <opencv2/imgproc.hpp>

#include <vector>

#include "era/error.h"
#include "image/image_io.h"

namespace era {

struct Image::Data {
  Source source = Source::kFile;
  std::string name;
  int width = 0, height = 0;
  std::vector<uint8_t> bytes;  // RGB rows (kPixels) or the encoded file (kEncoded)
};

Image::Image(std::shared_ptr<const Data> data) : data_(std::move(data)) {}

Image Image::from_file(const std::string& path) {
  auto d = std::make_shared<Data>();
  d->source = Source::kFile;
  d->name = path;
  return Image(std::move(d));
}

Image Image::from_pixels(const uint8_t* data, int width, int height, int stride_bytes, PixelFormat format) {
  // The one conversion routine the file path's decoder output also goes through for alpha and
  // grey (rgb_from_buffer); BGR orders are swapped first so every format ends as RGB rows.
  int channels = 3;
  if (format == PixelFormat::kRGBA8 || format == PixelFormat::kBGRA8) channels = 4;
  if (format == PixelFormat::kGray8) channels = 1;
  cv::Mat rgb = rgb_from_buffer(data, width, height, channels, stride_bytes);
  if (format == PixelFormat::kBGR8 || format == PixelFormat::kBGRA8) {
    // rgb_from_buffer kept the buffer's channel order (dropping alpha): it holds B, G, R.
    cv::cvtColor(rgb, rgb, cv::COLOR_BGR2RGB);
  }
  auto d = std::make_shared<Data>();
  d->source = Source::kPixels;
  d->name = "<in-memory image>";
  d->width = width;
  d->height = height;
  d->bytes.assign(rgb.data, rgb.data + rgb.total() * rgb.elemSize());
  return Image(std::move(d));
}

Image Image::from_encoded(const uint8_t* data, size_t size, const std::string& name) {
  if (!data || size == 0) throw Error(ErrorCode::kImage, name + ": empty encoded image buffer");
  auto d = std::make_shared<Data>();
  d->source = Source::kEncoded;
  d->name = name;
  d->bytes.assign(data, data + size);
  return Image(std::move(d));
}

Image::Source Image::source() const { return data_->source; }
const std::string& Image::name() const { return data_->name; }
int Image::width() const { return data_->width; }
int Image::height() const { return data_->height; }
const uint8_t* Image::data() const { return data_->bytes.empty() ? nullptr : data_->bytes.data(); }
size_t Image::size_bytes() const { return data_->bytes.size(); }

}  // namespace era
