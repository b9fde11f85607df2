// gyre-flexsp-calibrate: the compute model's constants (time_model.h) on
// this machine. Times one transformer layer of the harness (layer norms,
// the q/k/v and output projections, causal attention, a 4x MLP, the
// residuals), forward and backward, on one thread (a rank's share of a
// core), at several sequence lengths, and fits seconds = a L^2 + b L by
// least squares on the relative error. Prints the fit and each length's
// measured and fitted times; time_model.cc keeps the numbers and this
// command.
//
//   gyre-flexsp-calibrate [--hidden 512] [--heads 8] [--lengths 128,256,512,1024,2048] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness/layers.h"
#include "harness/random.h"

namespace {

using gyre::harness::Random;
namespace h = gyre::harness;

struct Weights {
  std::vector<float> ln1w, ln1b, ln2w, ln2b, wqkv, bqkv, wo, bo, w1, b1, w2, b2;
  explicit Weights(int c) {
    Random r(1);
    auto fill = [&](std::vector<float>& v, size_t n, float scale) {
      v.resize(n);
      for (float& x : v) x = r.normal(0, scale);
    };
    const size_t C = static_cast<size_t>(c);
    ln1w.assign(C, 1), ln1b.assign(C, 0), ln2w.assign(C, 1), ln2b.assign(C, 0);
    fill(wqkv, 3 * C * C, 0.02f), fill(bqkv, 3 * C, 0.0f), fill(wo, C * C, 0.02f),
        fill(bo, C, 0.0f);
    fill(w1, 4 * C * C, 0.02f), fill(b1, 4 * C, 0.0f), fill(w2, 4 * C * C, 0.02f),
        fill(b2, C, 0.0f);
  }
};

// Seconds of one layer's forward and backward over a sequence of t tokens.
double timeLayer(const Weights& w, int t, int c, int heads) {
  const size_t N = static_cast<size_t>(t), C = static_cast<size_t>(c);
  Random r(2);
  std::vector<float> x(N * C), ln1(N * C), m1(N), s1(N), qkv(3 * N * C), att(heads * N * N),
      y(N * C), proj(N * C), res1(N * C), ln2(N * C), m2(N), s2(N), fc(4 * N * C), gelu(4 * N * C),
      out(N * C), res2(N * C);
  for (float& v : x) v = r.normal(0, 1);
  // Gradients, as large as what they belong to.
  std::vector<float> dres2(N * C, 0.01f), dout(N * C), dgelu(4 * N * C), dfc(4 * N * C),
      dln2(N * C), dres1(N * C), dproj(N * C), dy(N * C), dqkv(3 * N * C), dln1(N * C), dx(N * C);
  std::vector<float> gwqkv(w.wqkv.size()), gbqkv(w.bqkv.size()), gwo(w.wo.size()), gbo(w.bo.size()),
      gw1(w.w1.size()), gb1(w.b1.size()), gw2(w.w2.size()), gb2(w.b2.size()), gl1w(C), gl1b(C),
      gl2w(C), gl2b(C);
  const auto t0 = std::chrono::steady_clock::now();
  h::layerNormForward(ln1.data(), m1.data(), s1.data(), x.data(), w.ln1w.data(), w.ln1b.data(), t,
                      c);
  h::linearForward(qkv.data(), ln1.data(), w.wqkv.data(), w.bqkv.data(), t, c, 3 * c);
  h::attentionForward(y.data(), att.data(), qkv.data(), 1, t, c, heads);
  h::linearForward(proj.data(), y.data(), w.wo.data(), w.bo.data(), t, c, c);
  h::residualForward(res1.data(), x.data(), proj.data(), t * c);
  h::layerNormForward(ln2.data(), m2.data(), s2.data(), res1.data(), w.ln2w.data(), w.ln2b.data(),
                      t, c);
  h::linearForward(fc.data(), ln2.data(), w.w1.data(), w.b1.data(), t, c, 4 * c);
  h::geluForward(gelu.data(), fc.data(), 4 * t * c);
  h::linearForward(out.data(), gelu.data(), w.w2.data(), w.b2.data(), t, 4 * c, c);
  h::residualForward(res2.data(), res1.data(), out.data(), t * c);

  h::residualBackward(dres1.data(), dout.data(), dres2.data(), t * c);
  h::linearBackward(dgelu.data(), gw2.data(), gb2.data(), dout.data(), gelu.data(), w.w2.data(), t,
                    4 * c, c);
  h::geluBackward(dfc.data(), fc.data(), dgelu.data(), 4 * t * c);
  h::linearBackward(dln2.data(), gw1.data(), gb1.data(), dfc.data(), ln2.data(), w.w1.data(), t, c,
                    4 * c);
  h::layerNormBackward(dres1.data(), gl2w.data(), gl2b.data(), dln2.data(), res1.data(),
                       w.ln2w.data(), m2.data(), s2.data(), t, c);
  h::residualBackward(dx.data(), dproj.data(), dres1.data(), t * c);
  h::linearBackward(dy.data(), gwo.data(), gbo.data(), dproj.data(), y.data(), w.wo.data(), t, c,
                    c);
  h::attentionBackward(dqkv.data(), dy.data(), qkv.data(), att.data(), 1, t, c, heads);
  h::linearBackward(dln1.data(), gwqkv.data(), gbqkv.data(), dqkv.data(), ln1.data(), w.wqkv.data(),
                    t, c, 3 * c);
  h::layerNormBackward(dx.data(), gl1w.data(), gl1b.data(), dln1.data(), x.data(), w.ln1w.data(),
                       m1.data(), s1.data(), t, c);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int> parseList(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int hidden = 512, heads = 8, reps = 3;
  std::vector<int> lengths{128, 256, 512, 1024, 2048};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--hidden") {
      hidden = std::atoi(argv[i + 1]);
    } else if (flag == "--heads") {
      heads = std::atoi(argv[i + 1]);
    } else if (flag == "--lengths") {
      lengths = parseList(argv[i + 1]);
    } else if (flag == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--hidden N] [--heads N] [--lengths L,L,...] [--reps N]\n",
                   argv[0]);
      return 2;
    }
  }
  if ((argc - 1) % 2 || hidden <= 0 || heads <= 0 || hidden % heads || reps <= 0 ||
      lengths.size() < 2) {
    std::fprintf(stderr,
                 "%s: --hidden must be a positive multiple of --heads, two lengths at least\n",
                 argv[0]);
    return 2;
  }
  h::useDeterministicBlas();  // one thread: one rank's core
  const Weights w(hidden);
  std::vector<double> seconds;
  for (int l : lengths) {
    double best = 1e300;
    for (int r = 0; r < reps; ++r) best = std::min(best, timeLayer(w, l, hidden, heads));
    seconds.push_back(best);
  }
  // Least squares on the relative error: minimise sum ((a L^2 + b L) / t - 1)^2.
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const double l = lengths[i], u = l * l / seconds[i], v = l / seconds[i];
    s11 += u * u, s12 += u * v, s22 += v * v, r1 += u, r2 += v;
  }
  const double det = s11 * s22 - s12 * s12;
  const double a = (r1 * s22 - r2 * s12) / det, b = (s11 * r2 - s12 * r1) / det;
  std::printf(
      "# gyre-flexsp-calibrate --hidden %d --heads %d (one layer, forward and backward, 1 thread, "
      "best of %d)\n",
      hidden, heads, reps);
  std::printf("attention_seconds = %.6g  # per token^2\nlinear_seconds = %.6g  # per token\n", a,
              b);
  for (size_t i = 0; i < lengths.size(); ++i) {
    const double l = lengths[i], fit = a * l * l + b * l;
    std::printf("L = %6d: measured %.4g s, fit %.4g s (%+.1f%%)\n", lengths[i], seconds[i], fit,
                100 * (fit / seconds[i] - 1));
  }
  return 0;
}
