// era_infer's chat mode (src/apps/cli/chat_mode.h) driven as a user drives it: through a pseudo
// terminal (prompt, streaming, commands, a bad image, Ctrl-C on an answer, Ctrl-D), and through a
// pipe (no prompt, same answers).
#include <gtest/gtest.h>

#include <poll.h>
#include <pty.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test_support.h"

namespace era {
namespace {

// A child process on the slave side of a pseudo terminal, as in a real terminal session.
class PtyProcess {
 public:
  explicit PtyProcess(const std::vector<std::string>& argv) {
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtyProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }
  bool started() const { return pid_ > 0 && master_ >= 0; }
  pid_t pid() const { return pid_; }

  void send(const std::string& text) { ASSERT_EQ(write(master_, text.data(), text.size()), static_cast<ssize_t>(text.size())); }

  // Everything printed until `needle` appears after what was consumed before (or the timeout):
  // the text up to and including the needle.
  std::string read_until(const std::string& needle, int timeout_s = 60) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (buffer_.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(master_, chunk, sizeof chunk);
      if (n <= 0) break;  // the child closed the terminal
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    const size_t at = buffer_.find(needle);
    if (at == std::string::npos) {
      ADD_FAILURE() << "timed out waiting for '" << needle << "'; got:\n" << buffer_;
      std::string all;
      all.swap(buffer_);
      return all;
    }
    std::string out = buffer_.substr(0, at + needle.size());
    buffer_.erase(0, at + needle.size());
    return out;
  }

  int wait_exit(int timeout_s = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      // keep draining the terminal so the child never blocks on a full buffer
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char chunk[4096];
        if (read(master_, chunk, sizeof chunk) > 0) continue;
      }
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string buffer_;
};

int visual_tokens(const std::string& stats) {
  std::smatch m;
  if (!std::regex_search(stats, m, std::regex("visual ([0-9]+) \\| text ([0-9]+)"))) return -1;
  return std::stoi(m[1]);
}
int text_tokens(const std::string& stats) {
  std::smatch m;
  if (!std::regex_search(stats, m, std::regex("visual ([0-9]+) \\| text ([0-9]+)"))) return -1;
  return std::stoi(m[2]);
}

const std::string kStatsEnd = "allocated";  // the last line of the stats block

TEST(EraInferChat, ConversationThroughAPseudoTerminal) {
  PtyProcess p({test::era_infer_path(), "-m", test::bundle_dir(), "-n", "6", "--stats", "--method", "era", "--tokens", "64"});
  ASSERT_TRUE(p.started());
  EXPECT_NE(p.read_until("> ").find("/help"), std::string::npos);  // the banner, then the prompt

  p.send("/image " + test::source_dir() + "/tests/data/sample.png\n");
  EXPECT_NE(p.read_until("> ").find("attached"), std::string::npos);
  p.send("What is in the picture?\n");
  const std::string first = p.read_until(kStatsEnd);
  EXPECT_EQ(visual_tokens(first), 64) << first;
  p.read_until("> ");

  // The second turn carries the first (its text and its image) in the prompt.
  p.send("And what colour is it?\n");
  const std::string second = p.read_until(kStatsEnd);
  EXPECT_EQ(visual_tokens(second), 64) << second;
  EXPECT_GT(text_tokens(second), text_tokens(first) + 6) << first << "\n----\n" << second;
  p.read_until("> ");

  // Reduction switched mid-session.
  p.send("/tokens 32\n");
  EXPECT_NE(p.read_until("> ").find("(tokens 32)"), std::string::npos);
  p.send("Again?\n");
  EXPECT_EQ(visual_tokens(p.read_until(kStatsEnd)), 32);
  p.read_until("> ");
  p.send("/method full\n");
  p.read_until("> ");
  p.send("Unreduced?\n");
  EXPECT_EQ(visual_tokens(p.read_until(kStatsEnd)), 576);  // the one image of the conversation, unreduced
  p.read_until("> ");

  // Bad input: one error line each, and the session goes on.
  p.send("/image /no/such/picture.png\n");
  EXPECT_NE(p.read_until("> ").find("error: image /no/such/picture.png: not found"), std::string::npos);
  p.send("/method magic\n");
  EXPECT_NE(p.read_until("> ").find("error: unknown reduction method 'magic'"), std::string::npos);
  p.send("/tokens many\n");
  EXPECT_NE(p.read_until("> ").find("error: /tokens needs a whole number"), std::string::npos);

  // /clear: no image and no history any more.
  p.send("/clear\n");
  p.read_until("> ");
  p.send("Hello?\n");
  const std::string fresh = p.read_until(kStatsEnd);
  EXPECT_EQ(visual_tokens(fresh), 0) << fresh;
  p.read_until("> ");

  p.send("\x04");  // Ctrl-D at the start of a line: end of input
  EXPECT_EQ(p.wait_exit(), 0);
}

// Ctrl-C while an answer is written stops that answer (not the program); Ctrl-C at the prompt
// leaves with status 0.
TEST(EraInferChat, CtrlCStopsTheAnswerThenLeavesAtThePrompt) {
  PtyProcess p({test::era_infer_path(), "-m", test::bundle_dir(), "-n", "2000", "--ignore-eos"});
  ASSERT_TRUE(p.started());
  p.read_until("> ");
  p.send("Write forever.\n");
  p.read_until("Write forever.");  // the terminal's echo
  usleep(500 * 1000);
  p.send("\x03");  // Ctrl-C: the terminal sends SIGINT
  EXPECT_NE(p.read_until("> ").find("(stopped; this turn is not kept)"), std::string::npos);
  p.send("\x03");
  EXPECT_EQ(p.wait_exit(), 0);
}

// Whether thread `tid` of process `pid` has SIGINT blocked (/proc: the SigBlk mask, hexadecimal).
bool blocks_sigint(pid_t pid, pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigBlk:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1;
  }
  return true;  // gone, or unreadable: not a candidate
}

// Ctrl-C at the prompt leaves whichever thread the kernel runs the handler on. A process-directed
// SIGINT goes to any thread that does not block it, LibTorch's workers included, and a handler
// run on a worker interrupts nothing the waiting thread does; here the signal is sent to such a
// worker directly, as the kernel may choose (the waiting thread used to sleep on for ever).
TEST(EraInferChat, CtrlCAtThePromptLeavesWhicheverThreadTakesIt) {
  PtyProcess p({test::era_infer_path(), "-m", test::bundle_dir(), "-n", "4", "--threads", "2", "--stats"});
  ASSERT_TRUE(p.started());
  p.read_until("> ");
  p.send("Hello?\n");  // one answer: LibTorch starts its worker threads
  p.read_until(kStatsEnd);
  p.read_until("> ");
  pid_t worker = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(p.pid()) + "/task")) {
    const pid_t tid = static_cast<pid_t>(std::stol(entry.path().filename().string()));
    if (tid != p.pid() && !blocks_sigint(p.pid(), tid)) {
      worker = tid;
      break;
    }
  }
  if (worker < 0) {
    p.send("\x04");
    p.wait_exit();
    GTEST_SKIP() << "era_infer has no second thread taking SIGINT here";
  }
  ASSERT_EQ(syscall(SYS_tgkill, p.pid(), worker, SIGINT), 0);
  EXPECT_EQ(p.wait_exit(), 0);
}

// From a pipe: no prompt or banner, the same streamed answers, exit 0 at end of input.
TEST(EraInferChat, PipedInputNeedsNoTerminal) {
  const std::string cmd = "printf '/image " + test::source_dir() +
                          "/tests/data/sample.png\\nWhat is it?\\n/stats on\\nMore?\\n' | " + test::era_infer_path() + " -m " +
                          test::bundle_dir() + " -n 4 --chat";
  const auto r = test::run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("> "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--- era stats ---"), std::string::npos) << r.out;
  EXPECT_EQ(visual_tokens(r.out), 576) << r.out;  // the image of the first turn is still in the conversation
  // Flags for one answer are refused in chat mode, naming the flag.
  const auto bad = test::run_command(test::era_infer_path() + " -m " + test::bundle_dir() + " --chat --json < /dev/null");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--json is for one answer"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace era
