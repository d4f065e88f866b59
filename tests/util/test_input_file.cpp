// util/input_file.h: outside files are read only when they are regular files of bounded size, and
// looking at a FIFO, a device or a directory never blocks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include "util/input_file.h"

namespace era {
namespace {

namespace fs = std::filesystem;

class InputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("era-input-file-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(InputFile, ReadsARegularFile) {
  std::ofstream(path("a.json")) << "{\"x\": 1}";
  EXPECT_EQ(read_input_file(path("a.json"), "options file", 100), "{\"x\": 1}");
  EXPECT_EQ(check_input_file(path("a.json"), "options file", 100), 8u);
}

TEST_F(InputFile, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  // A blocking open of a FIFO waits for a writer forever: run it where a hang shows as a timeout.
  auto done =
      std::async(std::launch::async, [&] { return message_of([&] { read_input_file(path("fifo"), "tokenizer", 1 << 20); }); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "reading a FIFO blocked";
  const std::string msg = done.get();
  EXPECT_NE(msg.find("tokenizer " + path("fifo")), std::string::npos) << msg;
  EXPECT_NE(msg.find("FIFO"), std::string::npos) << msg;
}

TEST_F(InputFile, RefusesDirectoriesDevicesMissingAndOversizedFilesByName) {
  EXPECT_NE(message_of([&] { read_input_file(dir_.string(), "--era-config", 100); }).find("is a directory"), std::string::npos);
  EXPECT_NE(message_of([&] { read_input_file("/dev/zero", "question file", 100); }).find("is a device"), std::string::npos);
  EXPECT_NE(message_of([&] { read_input_file(path("none"), "question file", 100); }).find("not found"), std::string::npos);
  std::ofstream(path("big")) << std::string(101, 'x');
  const std::string big = message_of([&] { read_input_file(path("big"), "manifest", 100); });
  EXPECT_NE(big.find("101 bytes, more than the 100 allowed"), std::string::npos) << big;
  EXPECT_NE(message_of([&] { read_input_file(std::string("a\0b", 3), "image", 100); }).find("NUL"), std::string::npos);
  EXPECT_NE(message_of([&] { read_input_file("", "image", 100); }).find("empty"), std::string::npos);
}

TEST_F(InputFile, TheErrorCarriesTheCallersCode) {
  try {
    read_input_file(path("none"), "bundle /b: files.tokenizer", 100, ErrorCode::kBundle);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBundle);
    EXPECT_EQ(std::string(e.what()).rfind("bundle /b: files.tokenizer " + path("none") + ": not found", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace era
