// Pipeline parallel on one process: the schedules as data (every
// micro-batch forwarded before its backward, the transfers where they
// belong, 1F1B's bound on live activations), the schedules of all stages
// played against each other with transfers that complete only when both
// sides have posted them (no deadlock, every message matched, the ideal
// bubble), and Pipeline itself on one rank and on two ranks of one process
// (gyreCommInitAll, a thread per stage) against the whole model, with its
// bad-argument errors. The multi-process runs are harness_pipeline_*
// (pipeline_rank.cc).
#include "harness/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "harness/model.h"
#include "harness/random.h"

namespace gyre::harness::test {
namespace {

using Kind = PipeAction::Kind;
constexpr Schedule kSchedules[] = {Schedule::GPipe, Schedule::OneFOneB};

std::string where(Schedule schedule, int stage, int stages, int m) {
  return std::string(scheduleName(schedule)) + " stage " + std::to_string(stage) + " of " +
         std::to_string(stages) + ", " + std::to_string(m) + " micro-batches";
}

TEST(HarnessPipelineSchedule, NamesRoundTrip) {
  for (Schedule s : kSchedules) EXPECT_EQ(parseSchedule(scheduleName(s)), s);
  EXPECT_THROW(parseSchedule("zb-h1"), std::invalid_argument);
}

TEST(HarnessPipelineSchedule, RefusesBadShapes) {
  EXPECT_THROW(pipelineSchedule(Schedule::GPipe, 0, 2, 0), std::invalid_argument);
  EXPECT_THROW(pipelineSchedule(Schedule::OneFOneB, 2, 2, 4), std::invalid_argument);
  EXPECT_THROW(pipelineSchedule(Schedule::OneFOneB, 0, 0, 4), std::invalid_argument);
  EXPECT_THROW(pipelineSchedule(static_cast<Schedule>(7), 0, 2, 4), std::invalid_argument);
  EXPECT_THROW(theoreticalBubble(2, 0), std::invalid_argument);
  EXPECT_DOUBLE_EQ(theoreticalBubble(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(theoreticalBubble(1, 3), 0.0);
}

// One stage's list on its own: each micro-batch received, forwarded, sent
// on, its gradient received, backward, sent back, in that order; forwards
// and backwards in micro-batch order; and never more activations alive
// than maxLiveActivations says, which it reaches.
TEST(HarnessPipelineSchedule, EveryStageDoesEachMicroBatchInOrder) {
  for (Schedule schedule : kSchedules) {
    for (int p = 1; p <= 4; ++p) {
      for (int s = 0; s < p; ++s) {
        for (int m = 1; m <= 6; ++m) {
          SCOPED_TRACE(where(schedule, s, p, m));
          const std::vector<PipeAction> actions = pipelineSchedule(schedule, s, p, m);
          const bool first = s == 0, last = s == p - 1;
          std::vector<Kind> expected;  // what each micro-batch goes through
          if (!first) expected.push_back(Kind::RecvActivation);
          expected.push_back(Kind::Forward);
          if (!last) expected.push_back(Kind::SendActivation);
          if (!last) expected.push_back(Kind::RecvGrad);
          expected.push_back(Kind::Backward);
          if (!first) expected.push_back(Kind::SendGrad);
          std::vector<std::vector<Kind>> seen(m);
          std::map<Kind, int> next;  // the next micro-batch of each kind
          int live = 0, peak = 0;
          for (const PipeAction& a : actions) {
            ASSERT_GE(a.micro, 0);
            ASSERT_LT(a.micro, m);
            EXPECT_EQ(a.micro, next[a.kind]++) << "kind " << static_cast<int>(a.kind);
            seen[a.micro].push_back(a.kind);
            if (a.kind == Kind::Forward) peak = std::max(peak, ++live);
            if (a.kind == Kind::Backward) --live;
          }
          for (int i = 0; i < m; ++i) EXPECT_EQ(seen[i], expected) << "micro-batch " << i;
          EXPECT_EQ(peak, maxLiveActivations(schedule, s, p, m));
          EXPECT_EQ(peak, schedule == Schedule::GPipe ? m : std::min(p - s, m));
        }
      }
    }
  }
}

// The shapes written out for p = 3, m = 4 (F/B: forward/backward, r/s:
// receive/send of activations, R/S: of gradients).
std::string compact(const std::vector<PipeAction>& actions) {
  std::string out;
  for (const PipeAction& a : actions) {
    out += "rFsRBS"[static_cast<int>(a.kind)];
    out += static_cast<char>('0' + a.micro);
    out += ' ';
  }
  if (!out.empty()) out.pop_back();
  return out;
}

TEST(HarnessPipelineSchedule, OneFOneBWarmsUpThenAlternates) {
  EXPECT_EQ(compact(pipelineSchedule(Schedule::OneFOneB, 0, 3, 4)),
            "F0 s0 F1 s1 F2 s2 R0 B0 F3 s3 R1 B1 R2 B2 R3 B3");
  EXPECT_EQ(compact(pipelineSchedule(Schedule::OneFOneB, 1, 3, 4)),
            "r0 F0 s0 r1 F1 s1 R0 B0 S0 r2 F2 s2 R1 B1 S1 r3 F3 s3 R2 B2 S2 R3 B3 S3");
  EXPECT_EQ(compact(pipelineSchedule(Schedule::OneFOneB, 2, 3, 4)),
            "r0 F0 B0 S0 r1 F1 B1 S1 r2 F2 B2 S2 r3 F3 B3 S3");
  EXPECT_EQ(compact(pipelineSchedule(Schedule::GPipe, 1, 3, 2)),
            "r0 F0 s0 r1 F1 s1 R0 B0 S0 R1 B1 S1");
}

// All stages' lists played together, as Pipeline runs them: consecutive
// transfers are one group, posted at once, and a group completes when every
// transfer in it has been posted by both sides (the strictest a transport
// can be: nothing buffered). A forward costs f, a backward b, a transfer
// nothing. Fails on a deadlock or a message that reaches the wrong
// micro-batch.
struct Played {
  bool deadlock = false;
  std::string mismatch;
  double makespan = 0;
  // Per stage, each computation's start time and label ("F3", "B0").
  std::vector<std::vector<std::pair<double, std::string>>> timeline;
};

Played play(Schedule schedule, int p, int m, double f, double b) {
  Played out;
  out.timeline.resize(p);
  std::vector<std::vector<PipeAction>> lists;
  for (int s = 0; s < p; ++s) lists.push_back(pipelineSchedule(schedule, s, p, m));
  // A channel: (sender, activations?) -> the posted sends' and receives'
  // (time, micro), in call order; the k-th send matches the k-th receive.
  struct Posted {
    std::vector<std::pair<double, int>> sends, recvs;
  };
  std::map<std::pair<int, bool>, Posted> channels;
  auto channelOf = [](int s, const PipeAction& a) {
    switch (a.kind) {
      case Kind::SendActivation:
        return std::make_tuple(std::make_pair(s, true), true);
      case Kind::RecvActivation:
        return std::make_tuple(std::make_pair(s - 1, true), false);
      case Kind::SendGrad:
        return std::make_tuple(std::make_pair(s, false), true);
      default:  // RecvGrad
        return std::make_tuple(std::make_pair(s + 1, false), false);
    }
  };
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0);
  // The open group's transfers: their channel, side and index.
  std::vector<std::vector<std::tuple<std::pair<int, bool>, bool, size_t>>> open(p);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      const std::vector<PipeAction>& list = lists[s];
      while (pc[s] < list.size()) {
        const PipeAction& a = list[pc[s]];
        if (!isTransfer(a.kind)) {
          out.timeline[s].push_back(
              {clock[s], (a.kind == Kind::Forward ? "F" : "B") + std::to_string(a.micro)});
          clock[s] += a.kind == Kind::Forward ? f : b;
          ++pc[s];
          progress = true;
          continue;
        }
        size_t n = 1;
        while (pc[s] + n < list.size() && isTransfer(list[pc[s] + n].kind)) ++n;
        if (open[s].empty()) {
          for (size_t k = 0; k < n; ++k) {
            const auto [key, send] = channelOf(s, list[pc[s] + k]);
            auto& side = send ? channels[key].sends : channels[key].recvs;
            open[s].push_back({key, send, side.size()});
            side.push_back({clock[s], list[pc[s] + k].micro});
          }
          progress = true;
        }
        double done = clock[s];
        bool complete = true;
        for (const auto& [key, send, index] : open[s]) {
          const Posted& c = channels[key];
          if (c.sends.size() <= index || c.recvs.size() <= index) {
            complete = false;
            break;
          }
          if (c.sends[index].second != c.recvs[index].second && out.mismatch.empty())
            out.mismatch = "stage " + std::to_string(s) + ": message " + std::to_string(index) +
                           " sent for micro-batch " + std::to_string(c.sends[index].second) +
                           ", received for " + std::to_string(c.recvs[index].second);
          done = std::max({done, c.sends[index].first, c.recvs[index].first});
        }
        if (!complete) break;
        clock[s] = done;
        pc[s] += n;
        open[s].clear();
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    out.deadlock = out.deadlock || pc[s] < lists[s].size();
    out.makespan = std::max(out.makespan, clock[s]);
  }
  return out;
}

TEST(HarnessPipelineSchedule, StagesNeverDeadlockAndReachTheIdealBubble) {
  for (Schedule schedule : kSchedules) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 6; ++m) {
        for (double b : {1.0, 2.0}) {
          SCOPED_TRACE(where(schedule, 0, p, m) + ", backward " + std::to_string(b));
          const Played played = play(schedule, p, m, 1.0, b);
          ASSERT_FALSE(played.deadlock);
          EXPECT_EQ(played.mismatch, "");
          // Uniform stages and free transfers: (m + p - 1)(f + b), so the
          // idle share is exactly theoreticalBubble.
          EXPECT_DOUBLE_EQ(played.makespan, (m + p - 1) * (1.0 + b));
          EXPECT_NEAR(1.0 - m * (1.0 + b) / played.makespan, theoreticalBubble(p, m), 1e-12);
        }
      }
    }
  }
}

// GYRE_PRINT_SCHEDULES=1 prints the slot tables of docs/harness.md.
TEST(HarnessPipelineSchedule, PrintsTheSlotTables) {
  if (!std::getenv("GYRE_PRINT_SCHEDULES")) GTEST_SKIP() << "set GYRE_PRINT_SCHEDULES=1";
  const int p = 4, m = 8;
  for (Schedule schedule : kSchedules) {
    const Played played = play(schedule, p, m, 1.0, 1.0);
    std::printf("%s, p = %d, m = %d, a forward or a backward per slot:\n", scheduleName(schedule),
                p, m);
    std::printf("slot     ");
    for (int t = 0; t < played.makespan; ++t) std::printf("%-3d", t);
    std::printf("\n");
    for (int s = 0; s < p; ++s) {
      std::string row(3 * static_cast<size_t>(played.makespan), ' ');
      for (const auto& [time, label] : played.timeline[s]) {
        row.replace(3 * static_cast<size_t>(time), label.size(), label);
      }
      for (size_t i = 0; i + 3 <= row.size(); i += 3)
        if (row.substr(i, 2) == "  ") row.replace(i, 2, " .");
      std::printf("stage %d  %s\n", s, row.c_str());
    }
    std::printf("\n");
  }
}

// ---- Pipeline itself ----

GptConfig smallConfig() { return {.vocab = 256, .maxSeq = 16, .layers = 4, .heads = 2, .dim = 16}; }

struct Batch {
  std::vector<int> inputs, targets;
  Batch(int sequences, int T, uint64_t seed) : inputs(sequences * T), targets(sequences * T) {
    Random rng(seed);
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i] = static_cast<int>(rng.below(256));
      targets[i] = static_cast<int>(rng.below(256));
    }
  }
};

double relativeNorm(std::span<const float> a, std::span<const float> b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

TEST(HarnessPipeline, OneStageIsTheWholeModel) {
  gyreComm_t comm = nullptr;
  ASSERT_EQ(gyreCommInitAll(&comm, 1, nullptr), gyreSuccess) << gyreGetLastError(nullptr);
  const int T = 16;
  const Batch batch(4, T, 5);
  Gpt whole(smallConfig()), model(smallConfig());
  whole.initialize(3);
  model.initialize(3);
  whole.zeroGrad();
  const float wholeLoss = whole.forward(batch.inputs.data(), batch.targets.data(), 4, T);
  whole.backward();
  {
    Pipeline pipe(comm, model);
    EXPECT_EQ(pipe.stages(), 1);
    for (Schedule schedule : kSchedules) {
      // One micro-batch: the same calls as the whole model, the same bits.
      model.zeroGrad();
      EXPECT_EQ(pipe.step(batch.inputs, batch.targets, {1, 4, T}, schedule), wholeLoss);
      EXPECT_TRUE(std::equal(model.grads().begin(), model.grads().end(), whole.grads().begin()));
      // Four: the mean of the four losses, the gradients of the mean.
      model.zeroGrad();
      EXPECT_NEAR(pipe.step(batch.inputs, batch.targets, {4, 1, T}, schedule), wholeLoss,
                  1e-6 * wholeLoss);
      EXPECT_LT(relativeNorm(model.grads(), whole.grads()), 1e-5);
      EXPECT_EQ(pipe.peakLiveActivations(), schedule == Schedule::GPipe ? 4 : 1);
      EXPECT_EQ(pipe.lastStep().stages.size(), 1u);
      EXPECT_GT(pipe.lastStep().stages[0].compute, 0.0);
    }
    // Bad arguments, before anything runs.
    auto expectError = [&](const std::function<void()>& call, const std::string& text) {
      try {
        call();
        ADD_FAILURE() << "no exception; expected one saying '" << text << "'";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      }
    };
    expectError(
        [&] {
          pipe.step(batch.inputs, batch.targets, {0, 4, T}, Schedule::GPipe);
        },
        "0 micro-batches; a step needs at least 1");
    expectError(
        [&] {
          pipe.step(batch.inputs, batch.targets, {2, 4, T}, Schedule::GPipe);
        },
        "64 input tokens for 2 micro-batches of 4 sequences of 16 tokens; need 128");
    expectError(
        [&] {
          pipe.step(batch.inputs, {}, {4, 1, T}, Schedule::OneFOneB);
        },
        "0 targets for 4 micro-batches");
    expectError(
        [&] {
          pipe.step(batch.inputs, batch.targets, {1, 2, 32}, Schedule::GPipe);
        },
        "sequences of 32 tokens; the model takes 1 to 16");
    // The pipeline is still usable.
    model.zeroGrad();
    EXPECT_EQ(pipe.step(batch.inputs, batch.targets, {1, 4, T}, Schedule::GPipe), wholeLoss);
  }
  EXPECT_EQ(gyreCommDestroy(comm), gyreSuccess);
}

// Runs body(stage, comm) on a thread per stage of an in-process pipeline.
void onStages(int stages, const std::function<void(int, gyreComm_t)>& body) {
  std::vector<gyreComm_t> comms(stages);
  ASSERT_EQ(gyreCommInitAll(comms.data(), stages, nullptr), gyreSuccess)
      << gyreGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int s = 0; s < stages; ++s) threads.emplace_back([&, s] { body(s, comms[s]); });
  for (std::thread& t : threads) t.join();
  for (gyreComm_t c : comms) EXPECT_EQ(gyreCommDestroy(c), gyreSuccess);
}

TEST(HarnessPipeline, TwoStagesGiveTheWholeModelsGradients) {
  const int T = 16, M = 3, b = 2;
  const Batch batch(M * b, T, 7);
  Gpt whole(smallConfig());
  whole.initialize(11);
  whole.zeroGrad();
  const float wholeLoss = whole.forward(batch.inputs.data(), batch.targets.data(), M * b, T);
  whole.backward();
  for (Schedule schedule : kSchedules) {
    SCOPED_TRACE(scheduleName(schedule));
    std::vector<float> losses(2);
    std::vector<std::vector<float>> tied(2);
    onStages(2, [&](int s, gyreComm_t comm) {
      Gpt model(smallConfig(), pipelineStage(smallConfig(), s, 2));
      model.initialize(11);
      Pipeline pipe(comm, model);
      model.zeroGrad();
      // Stage 1 needs no inputs and stage 0 no targets.
      losses[s] = pipe.step(s == 0 ? std::span<const int>(batch.inputs) : std::span<const int>(),
                            s == 1 ? std::span<const int>(batch.targets) : std::span<const int>(),
                            {M, b, T}, schedule);
      for (const ParamInfo& p : model.layout()) {
        EXPECT_LT(relativeNorm(model.grad(p.name), whole.grad(p.name)), 1e-5) << p.name;
      }
      std::span<const float> g = model.grad("wte");
      tied[s].assign(g.begin(), g.end());
      EXPECT_EQ(pipe.peakLiveActivations(), maxLiveActivations(schedule, s, 2, M));
    });
    EXPECT_EQ(losses[0], losses[1]);
    EXPECT_NEAR(losses[0], wholeLoss, 1e-6 * wholeLoss);
    EXPECT_EQ(tied[0], tied[1]);  // the same bits: both copies take the same step
  }
}

// Every stage throws, with the same kind of error, when one is wrong.
TEST(HarnessPipeline, BadStagesAndArgumentsThrowOnEveryStage) {
  auto expectEverywhere = [](const std::function<void(int, gyreComm_t)>& body,
                             const std::vector<std::string>& texts) {
    std::vector<std::string> errors(texts.size());
    onStages(static_cast<int>(texts.size()), [&](int s, gyreComm_t comm) {
      try {
        body(s, comm);
      } catch (const std::invalid_argument& e) {
        errors[s] = e.what();
      }
    });
    for (size_t s = 0; s < texts.size(); ++s)
      EXPECT_NE(errors[s].find(texts[s]), std::string::npos)
          << "stage " << s << ": '" << errors[s] << "'";
  };
  // A whole model on each of two ranks.
  expectEverywhere(
      [](int, gyreComm_t comm) {
        Gpt model(smallConfig());
        Pipeline pipe(comm, model);
      },
      {"stage 0 of 2 holds the output head", "stage 0 of 2 holds the output head"});
  // Stages of a three-stage split on two ranks.
  expectEverywhere(
      [](int s, gyreComm_t comm) {
        Gpt model(smallConfig(), pipelineStage(smallConfig(), s, 3));
        Pipeline pipe(comm, model);
      },
      {"stage 1 of 2 does not hold the output head", "stage 1 of 2 does not hold the output head"});
  // The right stages, but stage 1 asks for 0 micro-batches, then they disagree.
  const Batch batch(4, 16, 1);
  expectEverywhere(
      [&](int s, gyreComm_t comm) {
        Gpt model(smallConfig(), pipelineStage(smallConfig(), s, 2));
        model.initialize(1);
        Pipeline pipe(comm, model);
        try {
          pipe.step(batch.inputs, batch.targets, {s == 1 ? 0 : 2, 2, 16}, Schedule::OneFOneB);
        } catch (const std::invalid_argument& e) {
          // Then a good step still runs.
          EXPECT_NO_THROW(pipe.step(batch.inputs, batch.targets, {2, 2, 16}, Schedule::GPipe));
          throw;
        }
      },
      {"stage 1 was given bad arguments", "0 micro-batches; a step needs at least 1"});
  expectEverywhere(
      [&](int s, gyreComm_t comm) {
        Gpt model(smallConfig(), pipelineStage(smallConfig(), s, 2));
        model.initialize(1);
        Pipeline pipe(comm, model);
        pipe.step(batch.inputs, batch.targets, {2, 2, 16},
                  s == 0 ? Schedule::GPipe : Schedule::OneFOneB);
      },
      {"the stages disagree: stage 1 has 2 micro-batches of 2 sequences of 16 tokens, schedule "
       "1f1b, this stage 2 micro-batches of 2 sequences of 16 tokens, schedule gpipe",
       "the stages disagree: stage 0 has"});
}

}  // namespace
}  // namespace gyre::harness::test
