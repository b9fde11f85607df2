#include "harness/train/config.h"

#include <cmath>
#include <string>

namespace gyre::harness {

namespace {

gyreCodec_t codecOf(const std::string& name) {
  const char* names[] = {"none", "fp16", "bf16", "int8", "onebit"};
  for (int i = 0; i < 5; ++i)
    if (name == names[i]) return static_cast<gyreCodec_t>(i);
  return gyreCodecNone;  // parseTrainOptions accepted only these
}

gyrePeers_t peersOf(const std::string& name) {
  if (name == "shift_one") return gyrePeersShiftOne;
  if (name == "random") return gyrePeersRandom;
  return gyrePeersRing;
}

}  // namespace

TrainerConfig trainerConfig(const TrainOptions& o) {
  TrainerConfig c;
  c.model = {.vocab = 256,
             .maxSeq = o.seq,
             .layers = o.layers,
             .heads = o.heads,
             .dim = o.dim,
             .experts = o.experts,
             .topK = o.topK,
             .capacityFactor = o.capacityFactor,
             .auxCoef = o.auxCoef};
  c.mesh = {.dp = o.dp, .tp = o.tp, .pp = o.pp, .sp = o.sp, .ep = o.ep};
  c.zero = o.zero;
  c.schedule = parseSchedule(o.schedule);
  c.microBatches = o.microBatches;
  c.batch = o.batch;
  c.seq = o.seq;
  c.seed = o.seed;
  c.lr = {.maxLr = o.lr, .minLr = o.minLr, .warmupSteps = o.warmup, .totalSteps = o.steps};
  c.adam.weightDecay = o.weightDecay;
  c.clip = o.clip;
  c.codec = codecOf(o.codec);
  c.decentralized = !o.decentralized.empty();
  c.peers = peersOf(o.decentralized);
  c.flexsp.on = o.flexsp;
  const double median = o.flexspMedian > 0 ? o.flexspMedian : o.seq / 4.0;
  c.flexsp.lengths = {.mu = std::log(median),
                      .sigma = o.flexspSigma,
                      .minLen = o.flexspMin > 0 ? o.flexspMin : 1,
                      .maxLen = o.seq};
  c.flexsp.memoryTokens = o.flexspMemory;
  c.flexsp.planSeconds = o.flexspPlanSeconds;
  c.flexsp.fixedUlysses = o.flexspUlysses;
  c.flexsp.attentionSeconds = o.flexspAttentionSeconds;
  c.flexsp.linearSeconds = o.flexspLinearSeconds;
  return c;
}

}  // namespace gyre::harness
