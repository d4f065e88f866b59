#pragma once
// era_infer's interactive mode: a conversation on one loaded Session, read line by line from
// standard input (a terminal or a pipe). Plain lines are the user's turns; lines starting with
// '/' are commands (/help lists them). Every answer streams as it is generated; the statistics
// follow it when they are on. A failed turn (a bad image, a prompt too long for the context)
// prints one "error: ..." line and the conversation goes on without it.
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "era/era.h"

namespace era::cli {

struct ChatOptions {
  Request base;                     // generation and reduction settings of every turn
  std::vector<std::string> images;  // attached to the first turn (era_infer -i)
  std::string first_message;        // asked before reading input (era_infer --chat -p)
  bool stats = false;               // print the statistics after each answer (/stats)
  bool interactive = false;         // a terminal: print the "> " prompt and the banner
  // Prints the statistics of one answer (era_infer's --stats block).
  std::function<void(const ModelInfo&, const Result&)> print_stats;
};

// Runs the conversation until end of input or /quit; returns the exit code (0). SIGINT while an
// answer is generated stops that answer only; at the prompt it ends the session like end of input.
int run_chat(Session& session, const ChatOptions& options, std::istream& in, std::ostream& out);

}  // namespace era::cli
