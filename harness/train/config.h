// gyre-train's options as the Trainer's configuration: one mapping for
// gyre-train and the benchmarks that run its Trainer (bench/harness), so a
// new flag reaches both.
#pragma once

#include "harness/train/options.h"
#include "harness/trainer.h"

namespace gyre::harness {

TrainerConfig trainerConfig(const TrainOptions& options);

}  // namespace gyre::harness
