// gyrerun's command line. Options end at the first argument that is not an
// option (the program) or at "--", so the program's own flags are never read
// as gyrerun's (mpirun and torchrun behave the same way).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gyre::run {

enum class Bind { None, Core };

struct Options {
  int nranks = 0;
  Bind bind = Bind::None;
  bool prefix = true;     // "[K] " before each line; false passes bytes through
  std::string outputDir;  // non-empty: rank-K.out / rank-K.err files instead of relaying
  std::vector<std::pair<std::string, std::string>> env;  // -x NAME=VALUE, in order
  double timeoutSec = 0;                                 // 0: no limit
  double graceSec = 3;                                   // SIGTERM .. SIGKILL
  // --elastic MIN:MAX: a rank that fails is started again (with
  // GYRE_ELASTIC_REPLACEMENT=1, to join the others) up to maxRestarts times
  // in all, and the others go on; the job fails only when fewer than
  // elasticMin ranks are left running. 0: not elastic.
  int elasticMin = 0, elasticMax = 0;
  int maxRestarts = 3;
  std::vector<std::string> command;                      // program and its arguments
};

// What the command line asks for: run, or stop at once with an exit code
// (help, version, usage error) after printing `message` to the given stream.
struct ParseResult {
  enum class Action { Run, Exit } action = Action::Run;
  int exitCode = 0;
  bool toStderr = false;
  std::string message;
  Options options;
};

ParseResult parseOptions(int argc, const char* const* argv);

std::string usageText();

}  // namespace gyre::run
