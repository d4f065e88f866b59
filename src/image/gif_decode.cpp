#include "image/gif_decode.h"

#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "era/error.h"

namespace era {
namespace {

[[noreturn]] void fail_gif(const std::string& name, const std::string& why) { throw Error(ErrorCode::kImage, name + ": " + why); }

struct MemorySource {
  const uint8_t* data;
  size_t size, at = 0;
};

extern "C" int read_from_memory(GifFileType* gif, GifByteType* out, int n) {
  auto* src = static_cast<MemorySource*>(gif->UserData);
  const size_t take = std::min(static_cast<size_t>(std::max(n, 0)), src->size - src->at);
  std::memcpy(out, src->data + src->at, take);
  src->at += take;
  return static_cast<int>(take);
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int error = 0;
    DGifCloseFile(gif, &error);
  }
};

std::string gif_error(int code) {
  const char* text = GifErrorString(code);
  return text != nullptr ? text : "error " + std::to_string(code);
}

}  // namespace

cv::Mat decode_gif_first_frame(const uint8_t* data, size_t size, const std::string& name) {
  MemorySource source{data, size};
  int error = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&source, read_from_memory, &error));
  if (!gif) fail_gif(name, "cannot decode GIF image (" + gif_error(error) + ")");
  const auto corrupt = [&](const char* what) {
    fail_gif(name, std::string("corrupt or truncated GIF (") + what + ": " + gif_error(gif->Error) + ")");
  };

  int transparent = -1;  // from the graphic control extension before the first image, as Pillow reads it
  while (true) {
    GifRecordType type = UNDEFINED_RECORD_TYPE;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) corrupt("record");
    if (type == TERMINATE_RECORD_TYPE) fail_gif(name, "GIF has no image");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif.get(), &code, &ext) == GIF_ERROR) corrupt("extension");
      if (code == GRAPHICS_EXT_FUNC_CODE && ext != nullptr) {
        GraphicsControlBlock gcb{};
        if (DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK) transparent = gcb.TransparentColor;
      }
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif.get(), &ext) == GIF_ERROR) corrupt("extension");
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif.get()) == GIF_ERROR) corrupt("image descriptor");
    break;
  }

  const GifImageDesc& desc = gif->Image;
  if (desc.Width <= 0 || desc.Height <= 0) fail_gif(name, "GIF frame has no pixels");
  const ColorMapObject* colours = desc.ColorMap != nullptr ? desc.ColorMap : gif->SColorMap;
  if (colours == nullptr) fail_gif(name, "GIF has no colour table");
  // Pillow grows the picture to a frame reaching past the logical screen; era refuses such a file
  // instead: its size limits were checked on the screen size, and real GIFs do not do this.
  if (desc.Left < 0 || desc.Top < 0 || desc.Left + desc.Width > gif->SWidth || desc.Top + desc.Height > gif->SHeight) {
    fail_gif(name, "GIF frame (" + std::to_string(desc.Width) + "x" + std::to_string(desc.Height) + " at " +
                       std::to_string(desc.Left) + "," + std::to_string(desc.Top) + ") reaches past the logical screen (" +
                       std::to_string(gif->SWidth) + "x" + std::to_string(gif->SHeight) + ")");
  }
  const int width = gif->SWidth, height = gif->SHeight;

  std::vector<GifPixelType> frame(static_cast<size_t>(desc.Width) * static_cast<size_t>(desc.Height));
  const auto row = [&](int y) { return frame.data() + static_cast<size_t>(y) * static_cast<size_t>(desc.Width); };
  if (desc.Interlace) {  // four passes: rows 0, 8, ...; 4, 12, ...; 2, 6, ...; 1, 3, ...
    const int start[] = {0, 4, 2, 1}, step[] = {8, 8, 4, 2};
    for (int pass = 0; pass < 4; ++pass) {
      for (int y = start[pass]; y < desc.Height; y += step[pass]) {
        if (DGifGetLine(gif.get(), row(y), desc.Width) == GIF_ERROR) corrupt("pixels");
      }
    }
  } else {
    for (int y = 0; y < desc.Height; ++y) {
      if (DGifGetLine(gif.get(), row(y), desc.Width) == GIF_ERROR) corrupt("pixels");
    }
  }

  const auto colour_of = [&](int index) {
    if (index < 0 || index >= colours->ColorCount) return cv::Vec3b(0, 0, 0);
    const GifColorType& c = colours->Colors[index];
    return cv::Vec3b(c.Red, c.Green, c.Blue);
  };
  cv::Mat rgb(height, width, CV_8UC3, cv::Scalar::all(0));
  rgb.setTo(cv::Scalar(colour_of(transparent >= 0 ? transparent : 0)));
  for (int y = 0; y < desc.Height; ++y) {
    auto* out = rgb.ptr<cv::Vec3b>(desc.Top + y) + desc.Left;
    const GifPixelType* in = row(y);
    for (int x = 0; x < desc.Width; ++x) out[x] = colour_of(in[x]);
  }
  return rgb;
}

}  // namespace era
