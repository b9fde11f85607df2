// The transformer's layers, each a forward and a backward written out by
// hand (llm.c's shape). Activations are row-major [N, C] with N = B*T rows;
// weights are row-major [out, in], as PyTorch stores nn.Linear. Every
// backward ADDS into the gradients it is given (parameter gradients
// accumulate over micro-batches; an input's gradient may have several
// consumers, as the residual stream does), so callers zero them first.
#pragma once

namespace gyre::harness {

// OpenBLAS splits a product among its threads differently for each thread
// count, and with it the order of the additions: one thread makes every
// result a function of the seed alone. Idempotent; the model calls it.
void useDeterministicBlas();

// out[n] = wte[token[n]] + wpe[n % T].
void embeddingForward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                      int T, int C);
void embeddingBackward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B, int T,
                       int C);

// Per row: (x - mean) * rstd * weight + bias; mean and rstd [N] are kept for
// the backward.
void layerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int N, int C);
void layerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean, const float* rstd,
                       int N, int C);

// out[N, OC] = inp[N, C] * weight[OC, C]^T + bias[OC] (bias may be null).
void linearForward(float* out, const float* inp, const float* weight, const float* bias, int N,
                   int C, int OC);
// dbias may be null (no bias); dinp may be null (the input needs no gradient).
void linearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC);

// Causal multi-head self-attention over qkv [B*T, 3C] (queries, keys, values
// side by side, each split into NH heads of C/NH): out [B*T, C]. att
// [B, NH, T, T] keeps the softmaxed scores for the backward.
void attentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
void attentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                       int T, int C, int NH);

// GELU, tanh approximation (GPT-2's).
void geluForward(float* out, const float* inp, int n);
void geluBackward(float* dinp, const float* inp, const float* dout, int n);

// out = a + b, element-wise (the residual stream).
void residualForward(float* out, const float* a, const float* b, int n);
// The gradient of a sum flows unchanged to both summands.
void residualBackward(float* da, float* db, const float* dout, int n);

// Softmax of logits [N, V] into probs, and the mean over rows of
// -log probs[n][targets[n]].
float crossEntropyForward(float* probs, const float* logits, const int* targets, int N, int V);
// dlogits = (probs - onehot(targets)) / N: the gradient of the mean loss.
void crossEntropyBackward(float* dlogits, const float* probs, const int* targets, int N, int V);

}  // namespace gyre::harness
