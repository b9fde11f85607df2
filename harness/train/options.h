// gyre-train's command line: what a run trains, on which mesh, from which
// data, where it keeps checkpoints and logs. Parsing is separate from
// training so that every bad flag is refused, naming it, before any rank
// starts talking to another.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gyre::harness {

struct TrainOptions {
  // The mesh: dp x sp x tp x pp must be the job's rank count.
  int dp = 0;  // 0: whatever the job's ranks leave after sp, tp and pp
  int sp = 1;  // sequence parallelism (Ulysses): ranks splitting each sequence
  int tp = 1;
  int pp = 1;
  int zero = 0;                   // ZeRO stage 0..3 over the data-parallel ranks
  std::string codec = "none";     // none|fp16|bf16|int8|onebit: compressed gradient AllReduce
  std::string decentralized;      // ""|ring|shift_one|random: peer averaging instead of AllReduce
  std::string schedule = "1f1b";  // gpipe|1f1b (pp > 1)
  int microBatches = 0;           // per step and data-parallel rank; 0: 2 x pp when pp > 1, else 1
  // The model and the batch.
  int layers = 4, dim = 128, heads = 4;
  // A mixture of experts in every block's MLP (0: dense), spread over ep
  // ranks of the data group (expert parallelism; 1: every rank holds all).
  int experts = 0, topK = 2, ep = 1;
  float capacityFactor = 0.0f, auxCoef = 0.01f;
  int steps = 100;
  int batch = 16;  // sequences per step, over all data-parallel ranks
  int seq = 64;
  uint64_t seed = 1;
  float lr = 1e-3f, minLr = 1e-4f;
  int warmup = 10;
  float clip = 1.0f;
  float weightDecay = 0.1f;
  // Files.
  std::string data;           // a text file, tokenized byte by byte into DATA.tokens once
  std::string checkpointDir;  // save there (every checkpointEvery steps and at the end)
  int checkpointEvery = 0;    // 0: only at the end
  bool resume = false;        // continue from the newest complete checkpoint in checkpointDir
  // Elastic training (docs/harness.md, "Elastic training"): carry on with
  // elasticMin..elasticMax ranks, data parallelism over whoever is there;
  // 0: not elastic (a lost rank ends the run).
  int elasticMin = 0, elasticMax = 0;
  std::string log;            // a JSON line per step (rank 0)
  std::string plot;           // FILE.svg|png: loss and tokens/s against step
  std::vector<std::string> plotLogs;  // --plot with logs and no --data: draw those, train nothing
  // FlexSP (docs/harness.md, "FlexSP"): batches of --batch x --seq tokens
  // of sequences up to --seq long, lognormal lengths of median flexspMedian
  // and spread flexspSigma (of ln length) at least flexspMin long; planned
  // groups each step, memory flexspMemory tokens a rank (0: the batch's
  // share); flexspPlanSeconds the solver's budget (0: greedy).
  bool flexsp = false;
  double flexspMedian = 0, flexspSigma = 1.0;  // median 0: --seq / 4
  int flexspMin = 0;                           // 0: the world size
  int64_t flexspMemory = 0;
  double flexspPlanSeconds = 0;
  bool flexspUlysses = false;
  // The time model's compute constants (0: the built-in ones, scaled to --dim).
  double flexspAttentionSeconds = 0,
         flexspLinearSeconds = 0;  // the baseline: one group of the whole world every step
  bool quiet = false;
  bool help = false;  // --help: print trainUsage() and train nothing
};

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws UsageError naming the flag and what is wrong with it. argv[0] is the
// program.
TrainOptions parseTrainOptions(int argc, const char* const* argv);

// Checks what needs the job's size: fills dp when 0; throws UsageError when
// dp x sp x tp x pp is not `ranks`, or the batch does not split.
void resolveMesh(TrainOptions& options, int ranks);

std::string trainUsage();

}  // namespace gyre::harness
