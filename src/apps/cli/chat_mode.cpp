#include "apps/cli/chat_mode.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "era/error.h"
#include "util/input_file.h"

namespace era::cli {
namespace {

std::atomic<bool> g_interrupted{false};
// The write end of a pipe the handler writes a byte to, so that the prompt's poll wakes up
// whichever thread the kernel ran the handler on (-1: none).
volatile sig_atomic_t g_wake_fd = -1;

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  const int fd = g_wake_fd;
  if (fd >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = write(fd, &byte, 1);  // a full pipe is already awake
  }
}

// SIGINT sets a flag instead of killing the process: the answer being generated stops at the next
// token. Installed without SA_RESTART, so a read waiting at the prompt returns and the session
// ends as at end of input.
struct SigintGuard {
  struct sigaction previous {};
  int wake[2] = {-1, -1};
  SigintGuard() {
    if (pipe2(wake, O_NONBLOCK | O_CLOEXEC) == 0) g_wake_fd = wake[1];  // else: flag and EINTR alone
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &previous);
  }
  ~SigintGuard() {
    sigaction(SIGINT, &previous, nullptr);
    g_wake_fd = -1;
    for (const int fd : wake) {
      if (fd >= 0) close(fd);
    }
  }
  int wake_read_fd() const { return wake[0]; }
};

// After an answer: the Ctrl-C that stopped it is spent. The flag is cleared before the pipe is
// drained, so a Ctrl-C landing in between still leaves the flag set for the prompt.
void clear_interrupt(int wake_read_fd) {
  g_interrupted.store(false);
  char sink[64];
  while (wake_read_fd >= 0 && read(wake_read_fd, sink, sizeof sink) > 0) {
  }
}

// At the prompt: waits until the terminal has a line (true) or Ctrl-C comes (false). The signal
// goes to any thread of the process that does not block it, LibTorch's workers included, and a
// handler run on a worker interrupts no system call of this thread: so the handler also writes to
// a pipe that this poll watches beside the terminal (a blocked-signal ppoll alone waited for ever
// when a worker took the signal: era_infer chat tests, under load).
bool wait_for_line_or_ctrl_c(int fd, int wake_read_fd) {
  while (!g_interrupted.load()) {
    struct pollfd p[2]{};
    p[0].fd = fd;
    p[0].events = POLLIN;
    p[1].fd = wake_read_fd;  // a negative fd is ignored by poll
    p[1].events = POLLIN;
    const int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;        // the flag says whether it was Ctrl-C
    if (r > 0 && (p[1].revents & POLLIN)) break;  // Ctrl-C handled on another thread
    if (r != 0) return true;                      // input, end of input or an error: the read says which
  }
  return false;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

const char* kHelp =
    "commands:\n"
    "  /image FILE     attach an image to your next message (repeatable)\n"
    "  /clear          forget the conversation and its images\n"
    "  /method NAME    switch the reduction method (full, era, divprune, ...)\n"
    "  /tokens N       visual tokens kept per image (0 = use the keep ratio)\n"
    "  /system TEXT    replace the template's system text (/system alone: the bundle's again)\n"
    "  /stats on|off   statistics after each answer\n"
    "  /help           this list\n"
    "  /quit           leave (also end of input, Ctrl-D)\n"
    "Ctrl-C stops the answer being written.\n";

class Chat {
 public:
  Chat(Session& session, const ChatOptions& options, std::ostream& out, int wake_read_fd)
      : session_(session),
        options_(options),
        base_(options.base),
        stats_(options.stats),
        out_(out),
        pending_(options.images),
        wake_read_fd_(wake_read_fd) {}

  // false: leave the session.
  bool handle(const std::string& raw) {
    const std::string line = trim(raw);
    if (line.empty()) return true;
    if (line[0] != '/') {
      ask(line);
      return true;
    }
    std::istringstream words(line);
    std::string command;
    words >> command;
    std::string arg;
    std::getline(words, arg);
    arg = trim(arg);
    if (command == "/quit" || command == "/exit") return false;
    if (command == "/help") {
      out_ << kHelp;
    } else if (command == "/image") {
      attach(arg);
    } else if (command == "/clear") {
      history_.clear();
      history_images_.clear();
      pending_.clear();
      out_ << "(conversation cleared)\n";
    } else if (command == "/method") {
      Request changed = base_;
      changed.reduction.method = arg;
      apply(changed, "method " + arg);
    } else if (command == "/tokens") {
      Request changed = base_;
      char* end = nullptr;
      const long long n = std::strtoll(arg.c_str(), &end, 10);
      if (arg.empty() || *end != '\0' || n < 0) {
        out_ << "error: /tokens needs a whole number >= 0, got '" << arg << "'\n";
        return true;
      }
      changed.reduction.tokens = n;
      apply(changed, "tokens " + arg);
    } else if (command == "/system") {
      if (arg.empty()) base_.system.reset();
      else base_.system = arg;
      out_ << (arg.empty() ? "(system text: the bundle's)\n" : "(system text set)\n");
    } else if (command == "/stats") {
      if (arg != "on" && arg != "off") {
        out_ << "error: /stats on or /stats off\n";
        return true;
      }
      stats_ = arg == "on";
    } else {
      out_ << "error: unknown command " << command << " (/help lists them)\n";
    }
    return true;
  }

 private:
  void attach(const std::string& path) {
    if (path.empty()) {
      out_ << "error: /image needs a file\n";
      return;
    }
    try {
      check_input_file(path, "image", uint64_t{1} << 32, ErrorCode::kImage);
    } catch (const Error& e) {
      out_ << "error: " << e.what() << "\n";
      return;
    }
    pending_.push_back(path);
    out_ << "(image " << path << " attached to your next message)\n";
  }

  // Reduction settings are checked as a whole before they replace the current ones.
  void apply(const Request& changed, const std::string& what) {
    try {
      validate_request(changed);
    } catch (const Error& e) {
      out_ << "error: " << e.what() << "\n";
      return;
    }
    base_ = changed;
    out_ << "(" << what << ")\n";
  }

  void ask(const std::string& text) {
    Request r = base_;
    r.history = history_;
    r.images = history_images_;
    r.images.insert(r.images.end(), pending_.begin(), pending_.end());
    // The new images belong to this turn: their placeholders go in front of it, unless the user
    // wrote them where they want them.
    std::string user = text;
    if (count_images(text) == 0) {
      std::string prefix;
      for (size_t i = 0; i < pending_.size(); ++i) prefix += "<image>\n";
      user = prefix + text;
    }
    r.prompt = user;
    // The flag is not cleared here: a Ctrl-C pressed after Enter but before the answer starts
    // must stop it too (it is cleared once the answer is over).
    r.on_text = [this](const std::string& delta) {
      out_ << delta << std::flush;
      return !g_interrupted.load();
    };
    try {
      const Result result = session_.generate(r);
      clear_interrupt(wake_read_fd_);  // a Ctrl-C from here on is one at the prompt: it leaves
      out_ << "\n";
      if (result.finish_reason == "cancelled") {
        out_ << "(stopped; this turn is not kept)\n";
      } else {
        history_.push_back({user, result.text});
        history_images_.insert(history_images_.end(), pending_.begin(), pending_.end());
        pending_.clear();
      }
      if (stats_ && options_.print_stats) options_.print_stats(session_.info(), result);
    } catch (const Error& e) {
      clear_interrupt(wake_read_fd_);
      out_ << "\nerror: " << e.what() << "\n";
      if (!pending_.empty()) out_ << "(the images attached to this message were dropped)\n";
      pending_.clear();
    }
  }

  static size_t count_images(const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("<image>"); at != std::string::npos; at = text.find("<image>", at + 7)) ++n;
    return n;
  }

  Session& session_;
  const ChatOptions& options_;
  Request base_;
  bool stats_;
  std::ostream& out_;
  std::vector<Turn> history_;
  std::vector<std::string> history_images_;  // the images of the turns in history_, in order
  std::vector<std::string> pending_;         // attached to the next message
  int wake_read_fd_;                         // SigintGuard's pipe, drained after each answer
};

}  // namespace

int run_chat(Session& session, const ChatOptions& options, std::istream& in, std::ostream& out) {
  SigintGuard sigint;
  Chat chat(session, options, out, sigint.wake_read_fd());
  if (options.interactive) {
    const ModelInfo info = session.info();
    out << "era_infer chat: " << info.name << " (" << info.arch << ", " << info.device << "), method "
        << options.base.reduction.method << ". /help lists the commands, /quit or Ctrl-D leaves.\n";
  }
  if (!options.first_message.empty() && !chat.handle(options.first_message)) return 0;
  std::string line;
  while (true) {
    if (options.interactive) out << "> " << std::flush;
    // A terminal in canonical mode hands over one line per read, so nothing waits in a buffer
    // while ppoll waits on the descriptor.
    if (options.interactive && &in == &std::cin && !wait_for_line_or_ctrl_c(STDIN_FILENO, sigint.wake_read_fd())) break;
    if (!std::getline(in, line)) break;  // end of input, or Ctrl-C at the prompt (read interrupted)
    if (!chat.handle(line)) break;
  }
  if (options.interactive) out << "\n";
  return 0;
}

}  // namespace era::cli
