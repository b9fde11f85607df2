#include "harness/layers.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numbers>
#include <vector>

namespace gyre::harness {

void useDeterministicBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void embeddingForward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                      int T, int C) {
  for (int n = 0; n < B * T; ++n) {
    const float* te = wte + static_cast<size_t>(tokens[n]) * C;
    const float* pe = wpe + static_cast<size_t>(n % T) * C;
    float* o = out + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = te[c] + pe[c];
  }
}

void embeddingBackward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T,
                       int C) {
  for (int n = 0; n < B * T; ++n) {
    float* dte = dwte + static_cast<size_t>(tokens[n]) * C;
    float* dpe = dwpe + static_cast<size_t>(n % T) * C;
    const float* d = dout + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) {
      dte[c] += d[c];
      dpe[c] += d[c];
    }
  }
}

// GPT-2's epsilon; it also keeps rstd finite on a constant row.
constexpr float kLayerNormEps = 1e-5f;

void layerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float m = 0.0f;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    float var = 0.0f;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= C;
    float s = 1.0f / std::sqrt(var + kLayerNormEps);
    float* o = out + static_cast<size_t>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean, const float* rstd,
                       int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    const float* d = dout + static_cast<size_t>(n) * C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    // With xhat = (x - mean) * rstd and dnorm = dout * weight:
    // dx = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)).
    float dnormMean = 0.0f, dnormXhatMean = 0.0f;
    for (int c = 0; c < C; ++c) {
      float xhat = (x[c] - mean[n]) * rstd[n];
      float dnorm = d[c] * weight[c];
      dnormMean += dnorm;
      dnormXhatMean += dnorm * xhat;
    }
    dnormMean /= C;
    dnormXhatMean /= C;
    for (int c = 0; c < C; ++c) {
      float xhat = (x[c] - mean[n]) * rstd[n];
      float dnorm = d[c] * weight[c];
      dbias[c] += d[c];
      dweight[c] += xhat * d[c];
      dx[c] += rstd[n] * (dnorm - dnormMean - xhat * dnormXhatMean);
    }
  }
}

void linearForward(float* out, const float* inp, const float* weight, const float* bias, int N,
                   int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out,
              OC);
  if (bias == nullptr) return;
  for (int n = 0; n < N; ++n) {
    float* o = out + static_cast<size_t>(n) * OC;
    for (int oc = 0; oc < OC; ++oc) o[oc] += bias[oc];
  }
}

void linearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {  // dinp[N, C] += dout[N, OC] * weight[OC, C]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                1.0f, dinp, C);
  }
  // dweight[OC, C] += dout^T[OC, N] * inp[N, C]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  if (dbias == nullptr) return;
  for (int n = 0; n < N; ++n) {
    const float* d = dout + static_cast<size_t>(n) * OC;
    for (int oc = 0; oc < OC; ++oc) dbias[oc] += d[oc];
  }
}

// Each (batch, head) is a pair of products on strided slices of qkv: the
// scores Q K^T [T, T] and the output att V [T, hs]. The masked upper triangle
// is computed and then discarded; at the harness's sizes that is cheaper to
// read than a triangular product.
void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* q = qkv + static_cast<size_t>(b) * T * ld + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* a = att + (static_cast<size_t>(b) * NH + h) * T * T;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, ld, k, ld, 0.0f, a,
                  T);
      for (int i = 0; i < T; ++i) {  // softmax over the keys j <= i
        float* row = a + static_cast<size_t>(i) * T;
        float max = -std::numeric_limits<float>::infinity();
        for (int j = 0; j <= i; ++j) max = std::max(max, row[j]);
        float sum = 0.0f;
        for (int j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        for (int j = 0; j <= i; ++j) row[j] /= sum;
        for (int j = i + 1; j < T; ++j) row[j] = 0.0f;
      }
      float* o = out + static_cast<size_t>(b) * T * C + h * hs;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, ld, 0.0f, o,
                  C);
    }
  }
}

void attentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                       int T, int C, int NH) {
  const int hs = C / NH;
  const int ld = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  std::vector<float> datt(static_cast<size_t>(T) * T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const size_t row0 = static_cast<size_t>(b) * T * ld + h * hs;
      const float* q = qkv + row0;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + row0;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* a = att + (static_cast<size_t>(b) * NH + h) * T * T;
      const float* d = dout + static_cast<size_t>(b) * T * C + h * hs;
      // out = att V: datt = dout V^T, dV += att^T dout.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, v, ld, 0.0f,
                  datt.data(), T);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, d, C, 1.0f, dv,
                  ld);
      // Through the softmax, in place: dscore = att * (datt - sum_j att datt).
      // Masked entries have att = 0 and so get no gradient.
      for (int i = 0; i < T; ++i) {
        const float* arow = a + static_cast<size_t>(i) * T;
        float* drow = datt.data() + static_cast<size_t>(i) * T;
        float dot = 0.0f;
        for (int j = 0; j <= i; ++j) dot += arow[j] * drow[j];
        for (int j = 0; j < T; ++j) drow[j] = arow[j] * (drow[j] - dot);
      }
      // score = scale Q K^T: dQ += scale dscore K, dK += scale dscore^T Q.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, datt.data(), T, k, ld,
                  1.0f, dq, ld);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, datt.data(), T, q, ld,
                  1.0f, dk, ld);
    }
  }
}

namespace {
const float kGeluScale = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
}

void geluForward(float* out, const float* inp, int n) {
  for (int i = 0; i < n; ++i) {
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + 0.044715f * x * x * x)));
  }
}

void geluBackward(float* dinp, const float* inp, const float* dout, int n) {
  for (int i = 0; i < n; ++i) {
    float x = inp[i];
    float u = kGeluScale * (x + 0.044715f * x * x * x);
    float t = std::tanh(u);
    float sech2 = 1.0f - t * t;
    float grad =
        0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += grad * dout[i];
  }
}

void residualForward(float* out, const float* a, const float* b, int n) {
  for (int i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residualBackward(float* da, float* db, const float* dout, int n) {
  for (int i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

float crossEntropyForward(float* probs, const float* logits, const int* targets, int N, int V) {
  double loss =
      0.0;  // a sum over every token of the batch: double keeps it exact enough to compare
  for (int n = 0; n < N; ++n) {
    const float* l = logits + static_cast<size_t>(n) * V;
    float* p = probs + static_cast<size_t>(n) * V;
    float max = *std::max_element(l, l + V);
    float sum = 0.0f;
    for (int v = 0; v < V; ++v) {
      p[v] = std::exp(l[v] - max);
      sum += p[v];
    }
    for (int v = 0; v < V; ++v) p[v] /= sum;
    // From the logits rather than log(p): p of a hopeless target underflows.
    loss += static_cast<double>(std::log(sum)) - (l[targets[n]] - max);
  }
  return static_cast<float>(loss / N);
}

void crossEntropyBackward(float* dlogits, const float* probs, const int* targets, int N, int V) {
  const float inv = 1.0f / N;
  for (int n = 0; n < N; ++n) {
    const float* p = probs + static_cast<size_t>(n) * V;
    float* d = dlogits + static_cast<size_t>(n) * V;
    for (int v = 0; v < V; ++v) d[v] += p[v] * inv;
    d[targets[n]] -= inv;
  }
}

}  // namespace gyre::harness
