// Hand-written rather than CLI11: gyrerun must stop at the program name and
// still reject unknown options before it, which CLI11's prefix mode (it hands
// an unknown option over as if it were the program) cannot express.
#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "gyre/gyre.h"

namespace gyre::run {

std::string usageText() {
  return "usage: gyrerun -n N [--bind none|core] [--tag-output | --no-prefix] [--output-dir DIR]\n"
         "               [-x NAME=VALUE]... [--timeout SEC] [--grace SEC]\n"
         "               [--elastic MIN:MAX [--max-restarts K]] [--] program [args...]\n";
}

namespace {

constexpr int kMaxRanks = 4096;
constexpr double kMaxSeconds = 1e7;  // ~115 days; keeps nanosecond arithmetic in range

std::optional<int> parseRankCount(const std::string& s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v < 1 || v > kMaxRanks) return std::nullopt;
  return v;
}

std::optional<double> parseSeconds(const std::string& s, bool allowZero) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0 || v > kMaxSeconds)
    return std::nullopt;
  if (v == 0 && !allowZero) return std::nullopt;
  return v;
}

ParseResult usageError(const std::string& problem) {
  ParseResult r;
  r.action = ParseResult::Action::Exit;
  r.exitCode = 2;
  r.toStderr = true;
  r.message = "gyrerun: " + problem + "\n" + usageText() +
              "Run 'gyrerun --help' for the meaning of each option.\n";
  return r;
}

// The option names that take a value, short and long spellings.
bool takesValue(const std::string& name) {
  static const char* const names[] = {"-n",        "--np",    "--bind",    "--output-dir", "-x",
                                      "--env",     "--timeout", "--grace", "--elastic",    "--max-restarts"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

std::string helpText() {
  return usageText() +
         "\n"
         "Starts N ranks of program on this machine, each with the environment that\n"
         "gyreCommInitFromEnv reads, hosts their rendezvous root, and relays their output.\n"
         "\n"
         "  -n, --np N          number of ranks, 1 to 4096 (required)\n"
         "  --bind none|core    core: pin rank i to the i-th CPU gyrerun may use (default none)\n"
         "  --tag-output        prefix every output line with \"[K] \", K the rank (default)\n"
         "  --no-prefix         pass the ranks' output through unchanged\n"
         "  --output-dir DIR    write rank K's stdout and stderr to DIR/rank-K.out and .err\n"
         "  -x, --env NAME=VALUE  set a variable in every rank's environment (repeatable)\n"
         "  --timeout SEC       stop every rank after SEC seconds and exit with status 124\n"
         "  --grace SEC         seconds between SIGTERM and SIGKILL when stopping ranks (default "
         "3)\n"
         "  --elastic MIN:MAX   a rank that fails is started again with GYRE_ELASTIC_REPLACEMENT=1\n"
         "                      (gyre-train --elastic joins it to the others) while the others go\n"
         "                      on; the job fails when fewer than MIN ranks are left\n"
         "  --max-restarts K    ranks started again at most, in all (default 3; with --elastic)\n"
         "  -h, --help          print this help and exit\n"
         "  --version           print gyrerun's version and exit\n"
         "\n"
         "Exit status: 0 when every rank exits 0; the first failing rank's status (128+N\n"
         "for signal N); 124 on --timeout; 127 when the program cannot be run; 2 for a\n"
         "usage error; 1 when gyrerun itself cannot start the job.\n";
}

ParseResult exitWith(int code, std::string message) {
  ParseResult r;
  r.action = ParseResult::Action::Exit;
  r.exitCode = code;
  r.message = std::move(message);
  return r;
}

}  // namespace

ParseResult parseOptions(int argc, const char* const* argv) {
  ParseResult result;
  Options& o = result.options;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;  // the program

    // Split "--name=value" and "-nVALUE" / "-xVALUE" into name and value.
    std::string name = arg, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        hasValue = true;
      }
    } else if (arg == "-np") {
      name = "--np";  // mpirun's spelling
    } else if (arg.size() > 2 && (arg[1] == 'n' || arg[1] == 'x')) {
      name = arg.substr(0, 2);
      value = arg.substr(2);
      hasValue = true;
    }

    if (name == "-h" || name == "--help") return exitWith(0, helpText());
    if (name == "--version")
      return exitWith(0, "gyrerun (gyre) " + std::to_string(GYRE_MAJOR) + "." +
                             std::to_string(GYRE_MINOR) + "." + std::to_string(GYRE_PATCH) + "\n");
    if (name == "--tag-output" || name == "--no-prefix") {
      if (hasValue) return usageError("option " + name + " takes no value");
      o.prefix = name == "--tag-output";
      continue;
    }
    if (!takesValue(name)) return usageError("unknown option '" + arg + "'");
    if (!hasValue) {
      if (i + 1 >= argc) return usageError("option " + name + " needs a value");
      value = argv[++i];
    }

    if (name == "-n" || name == "--np") {
      auto n = parseRankCount(value);
      if (!n)
        return usageError("the rank count must be a whole number from 1 to 4096, not '" + value +
                          "'");
      o.nranks = *n;
    } else if (name == "--bind") {
      if (value == "none")
        o.bind = Bind::None;
      else if (value == "core")
        o.bind = Bind::Core;
      else
        return usageError("--bind takes 'none' or 'core', not '" + value + "'");
    } else if (name == "--output-dir") {
      if (value.empty()) return usageError("--output-dir needs a directory");
      o.outputDir = value;
    } else if (name == "-x" || name == "--env") {
      size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0)
        return usageError(name + " takes NAME=VALUE, not '" + value + "'");
      o.env.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    } else if (name == "--timeout") {
      auto s = parseSeconds(value, false);
      if (!s)
        return usageError("--timeout takes a positive number of seconds, not '" + value + "'");
      o.timeoutSec = *s;
    } else if (name == "--elastic") {
      const size_t colon = value.find(':');
      auto lo = colon == std::string::npos ? std::nullopt : parseRankCount(value.substr(0, colon));
      auto hi = colon == std::string::npos ? std::nullopt : parseRankCount(value.substr(colon + 1));
      if (!lo || !hi || *lo > *hi)
        return usageError("--elastic takes MIN:MAX, rank counts with MIN <= MAX, not '" + value + "'");
      o.elasticMin = *lo;
      o.elasticMax = *hi;
    } else if (name == "--max-restarts") {
      auto k = parseRankCount(value);
      if (!k && value != "0")
        return usageError("--max-restarts takes a count from 0 to 4096, not '" + value + "'");
      o.maxRestarts = k ? *k : 0;
    } else if (name == "--grace") {
      auto s = parseSeconds(value, true);
      if (!s)
        return usageError("--grace takes a number of seconds (0 or more), not '" + value + "'");
      o.graceSec = *s;
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.nranks == 0) return usageError("the number of ranks (-n N) is required");
  if (o.command.empty()) return usageError("no program to run");
  if (o.elasticMax > 0 && (o.nranks < o.elasticMin || o.nranks > o.elasticMax))
    return usageError("-n " + std::to_string(o.nranks) + " is outside --elastic " + std::to_string(o.elasticMin) +
                      ":" + std::to_string(o.elasticMax));
  return result;
}

}  // namespace gyre::run
