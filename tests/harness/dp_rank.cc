// One rank of the data-parallel test, started by gyrerun (tests/harness/
// CMakeLists.txt): `gyrerun -n R --timeout S harness_dp_rank [BUCKET_ELEMS]`.
//
// Each rank trains the same model for 20 steps on its share of a global
// batch of 8 sequences, with the gradients averaged by DataParallel, and
// also trains the single-rank run of the same global batches by itself.
// It checks that (a) the loss of every step, averaged over the ranks,
// matches the single-rank loss within 1e-5 relative, (b) the final
// parameters match the single-rank ones within 1e-5 relative (per tensor,
// in norm; see below), and (c) every
// rank's parameters are the same bits (a hash of them, gathered). Exits 0
// when all hold; otherwise prints what did not and exits 1.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "gyre/gyre.h"
#include "harness/data.h"
#include "harness/data_parallel.h"
#include "harness/model.h"
#include "harness/optimizer.h"
#include "harness/token_file.h"

namespace fs = std::filesystem;
using namespace gyre::harness;

namespace {

constexpr int kSteps = 20, kBatch = 8, kSeq = 32;
constexpr uint64_t kSeed = 1234;
constexpr double kTolerance = 1e-5;

GptConfig modelConfig() {
  return {.vocab = 256, .maxSeq = kSeq, .layers = 2, .heads = 4, .dim = 32};
}

// Sentences with a little variety, so that the loss has something to learn.
std::string corpus() {
  const char* words[] = {"the", "quick", "brown",  "fox",   "jumps", "over", "lazy", "dog",
                         "and", "cat",   "sleeps", "under", "a",     "warm", "sun"};
  std::string text;
  uint64_t x = 99;
  while (text.size() < 20000) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(x >> 33) % std::size(words)];
    text += ((x >> 20) % 7 == 0) ? ". " : " ";
  }
  return text;
}

struct Run {
  std::vector<float> losses;
  std::vector<float> params;
};

// Trains kSteps steps as rank `rank` of `ranks` (dp == nullptr: one rank on
// the whole global batch).
Run train(const fs::path& source, const fs::path& tokens, DataParallel* dp, Gpt& model) {
  const int rank = dp ? dp->rank() : 0, ranks = dp ? dp->ranks() : 1;
  DataLoader loader(openText(source, tokens),
                    {.batch = kBatch, .seq = kSeq, .seed = kSeed, .rank = rank, .ranks = ranks});
  AdamW adam(decaySegments(model.layout()), model.params().size(), AdamWConfig{});
  const LrSchedule schedule{.maxLr = 1e-2f, .minLr = 1e-3f, .warmupSteps = 5, .totalSteps = kSteps};
  const int b = loader.localBatch();
  std::vector<int> inputs(b * kSeq), targets(b * kSeq);
  Run run;
  for (int step = 0; step < kSteps; ++step) {
    loader.batch(step, inputs, targets);
    model.zeroGrad();
    const float loss = model.forward(inputs.data(), targets.data(), b, kSeq);
    if (dp) {
      dp->backward();
      run.losses.push_back(dp->averageLoss(loss));
    } else {
      model.backward();
      run.losses.push_back(loss);
    }
    clipToNorm(model.grads(), std::sqrt(sumOfSquares(model.grads())), 1.0f);
    adam.step(model.params(), model.grads(), learningRate(schedule, step));
  }
  run.params.assign(model.params().begin(), model.params().end());
  return run;
}

double relative(double a, double b) {
  const double scale = std::max(std::fabs(a), std::fabs(b));
  return scale == 0 ? 0 : std::fabs(a - b) / scale;
}

int body(int argc, char** argv) {
  const size_t bucketElems = argc > 1 ? std::stoul(argv[1]) : kDefaultBucketElems;
  gyreComm_t comm = nullptr;
  checkGyre(gyreCommInitFromEnv(&comm, nullptr), "gyreCommInitFromEnv", nullptr);
  int rank = 0, ranks = 1;
  checkGyre(gyreCommUserRank(comm, &rank), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &ranks), "gyreCommCount", comm);

  std::string tmpl = (fs::temp_directory_path() / "gyre-dp-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = tmpl, source = dir / "corpus.txt", tokens = dir / "corpus.tokens";
  std::ofstream(source, std::ios::binary) << corpus();

  Gpt single(modelConfig());
  single.initialize(kSeed);
  const Run reference = train(source, tokens, nullptr, single);

  Gpt model(modelConfig());
  model.initialize(kSeed + static_cast<uint64_t>(rank));  // the broadcast makes them rank 0's
  DataParallel dp(comm, model, bucketElems);
  dp.broadcastParameters();
  const Run run = train(source, tokens, &dp, model);
  fs::remove_all(dir);

  int failures = 0;
  double worstLoss = 0, worstParam = 0;
  for (int s = 0; s < kSteps; ++s) {
    const double r = relative(run.losses[s], reference.losses[s]);
    worstLoss = std::max(worstLoss, r);
    if (r > kTolerance) {
      std::printf("rank %d: step %d loss %.9g, single-rank %.9g (relative %.3g)\n", rank, s,
                  run.losses[s], reference.losses[s], r);
      ++failures;
    }
  }
  // Parameters: per named tensor, the norm of the difference relative to
  // the norm of the single-rank tensor (an element near 0, a bias that
  // crossed zero, has no meaningful relative difference of its own). The
  // attention's key bias (the middle third of each qkv.b) is left out: its
  // exact gradient is 0 (a softmax does not change when the same q.b_k is
  // added to every score of a row), so what backward computes for it is
  // rounding noise, which AdamW's normalized step turns into lr-sized moves
  // that no other summation order reproduces. Its bits are still checked
  // across the ranks below.
  size_t badParams = 0;
  const size_t C = static_cast<size_t>(modelConfig().dim);
  for (const ParamInfo& p : model.layout()) {
    const bool qkvBias = p.name.ends_with("attn.qkv.b");
    double diff = 0, norm = 0;
    for (size_t i = 0; i < p.size; ++i) {
      if (qkvBias && i >= C && i < 2 * C) continue;
      const double d = double(run.params[p.offset + i]) - reference.params[p.offset + i];
      diff += d * d;
      norm += double(reference.params[p.offset + i]) * reference.params[p.offset + i];
    }
    const double r = norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
    worstParam = std::max(worstParam, r);
    if (r > kTolerance && badParams++ < 5) {
      std::printf("rank %d: %s differs from the single-rank run by %.3g of its norm\n", rank,
                  p.name.c_str(), r);
    }
  }
  failures += badParams > 0;

  // (c) the replicas: every rank's hash of its parameters' bytes, gathered.
  const auto* bytes = reinterpret_cast<const uint8_t*>(run.params.data());
  uint64_t hash = fnv1a64({bytes, run.params.size() * sizeof(float)});
  std::vector<uint64_t> hashes(ranks);
  checkGyre(gyreAllGather(&hash, hashes.data(), 1, gyreUint64, comm, nullptr), "gyreAllGather",
            comm);
  for (int r = 0; r < ranks; ++r) {
    if (hashes[r] != hash) {
      std::printf(
          "rank %d: rank %d's parameters differ from this rank's (hash %016llx, not %016llx)\n",
          rank, r, static_cast<unsigned long long>(hashes[r]),
          static_cast<unsigned long long>(hash));
      ++failures;
    }
  }
  std::printf(
      "rank %d of %d: %zu buckets of at most %zu elements, %d steps, loss %.5f -> %.5f, "
      "worst relative difference from one rank: loss %.3g, parameters %.3g; %s\n",
      rank, ranks, dp.buckets().size(), bucketElems, kSteps, run.losses.front(), run.losses.back(),
      worstLoss, worstParam, failures ? "FAILED" : "ok");
  checkGyre(gyreCommFinalize(comm), "gyreCommFinalize", comm);
  gyreCommDestroy(comm);
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::printf("harness_dp_rank: %s\n", e.what());
    return 1;
  }
}
