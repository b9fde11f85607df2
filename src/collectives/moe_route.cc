#include "collectives/moe_route.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/hash.h"
#include "kernels/common/arith.h"

namespace gyre::collectives {

MoeRoute routeTokens(int nranks, int rank, uint32_t experts, uint32_t k, size_t tokens, uint64_t capacity,
                     const std::vector<int>& expertRank, const int32_t* choices) {
  MoeRoute r;
  r.nranks = nranks;
  r.rank = rank;
  r.experts = experts;
  r.k = k;
  r.tokens = tokens;
  r.capacity = capacity;
  r.expertRank = expertRank;
  const size_t n = static_cast<size_t>(nranks);
  r.localOf.assign(n, {});
  r.localIndex.assign(experts, 0);
  for (uint32_t e = 0; e < experts; ++e) {
    auto& mine = r.localOf[static_cast<size_t>(expertRank[e])];
    r.localIndex[e] = static_cast<uint32_t>(mine.size());
    mine.push_back(e);
  }
  // Capacity first, in priority order: slot 0 of every token, then slot 1...
  r.sent.assign(experts, 0);
  r.dropped.assign(experts, 0);
  r.slotRow.assign(tokens * k, -1);
  std::vector<uint64_t> place(tokens * k, 0);  // a kept slot's place in its expert's block
  for (uint32_t s = 0; s < k; ++s)
    for (size_t t = 0; t < tokens; ++t) {
      const int32_t e = choices[t * k + s];
      if (e < 0) continue;
      if (capacity && r.sent[e] >= capacity) {
        ++r.dropped[e];
        continue;
      }
      place[t * k + s] = r.sent[e]++;
      r.slotRow[t * k + s] = 0;  // kept; its row is known once the blocks are laid out
    }
  // Blocks by destination rank, then its experts in increasing id.
  r.blockFirst.assign(experts, 0);
  r.rankFirst.assign(n + 1, 0);
  r.countsAt.assign(n + 1, 0);
  size_t row = 0;
  for (size_t q = 0; q < n; ++q) {
    r.rankFirst[q] = row;
    r.countsAt[q] = r.countsOut.size();
    for (uint32_t e : r.localOf[q]) {
      r.blockFirst[e] = row;
      row += r.sent[e];
      r.countsOut.push_back(r.sent[e]);
      r.countsOut.push_back(r.dropped[e]);
    }
  }
  r.rankFirst[n] = row;
  r.countsAt[n] = r.countsOut.size();
  for (size_t i = 0; i < tokens * k; ++i)
    if (r.slotRow[i] >= 0) r.slotRow[i] = static_cast<int64_t>(r.blockFirst[choices[i]] + place[i]);
  r.countsIn.assign(2 * r.localCount() * n, 0);
  r.code = moeShapeCode(r, 0);
  return r;
}

void settleReceived(MoeRoute& r) {
  const size_t n = static_cast<size_t>(r.nranks), local = r.localCount();
  r.recvRows.assign(local * n, 0);
  r.recvFirst.assign(local * n, 0);
  r.recvDropped.assign(local, 0);
  size_t row = 0;
  for (size_t l = 0; l < local; ++l)
    for (size_t q = 0; q < n; ++q) {
      const uint64_t* c = &r.countsIn[(q * local + l) * 2];
      r.recvRows[l * n + q] = c[0];
      r.recvFirst[l * n + q] = row;
      r.recvDropped[l] += c[1];
      row += c[0];
    }
  r.recvTotal = row;
  r.received = true;
}

uint64_t moeShapeCode(const MoeRoute& r, size_t hidden) {
  uint64_t h = fnv1a(r.expertRank.data(), r.expertRank.size() * sizeof(int));
  h = fnv1a(&r.capacity, sizeof(r.capacity), h);
  const uint64_t print = (h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48)) & 0xffff;
  return uint64_t{r.experts} | uint64_t{r.k} << 16 | uint64_t{hidden} << 24 | print << 48;
}

std::string describeMoeShape(uint64_t code) {
  char print[8];
  std::snprintf(print, sizeof(print), "%04llx", static_cast<unsigned long long>(code >> 48));
  std::string s = std::to_string(code & 0xffff) + " experts, top-" + std::to_string((code >> 16) & 0xff);
  if (const uint64_t h = (code >> 24) & 0xffffff) s += ", hidden " + std::to_string(h);
  return s + ", map and capacity " + print;
}

void packRows(const MoeRoute& r, const void* input, bool perSlot, size_t rowBytes, void* packed) {
  const auto* in = static_cast<const char*>(input);
  auto* out = static_cast<char*>(packed);
  for (size_t t = 0; t < r.tokens; ++t)
    for (uint32_t s = 0; s < r.k; ++s) {
      const int64_t row = r.slotRow[t * r.k + s];
      if (row < 0) continue;
      const char* from = in + (perSlot ? (t * r.k + s) : t) * rowBytes;
      std::memcpy(out + static_cast<size_t>(row) * rowBytes, from, rowBytes);
    }
}

void copyOwnRows(const MoeRoute& r, const void* packed, size_t rowBytes, void* output) {
  const size_t n = static_cast<size_t>(r.nranks), me = static_cast<size_t>(r.rank);
  const auto& mine = r.localOf[me];
  for (size_t l = 0; l < mine.size(); ++l)
    if (const size_t rows = r.recvRows[l * n + me])
      std::memcpy(static_cast<char*>(output) + r.recvFirst[l * n + me] * rowBytes,
                  static_cast<const char*>(packed) + r.blockFirst[mine[l]] * rowBytes, rows * rowBytes);
}

namespace {

// A value of t as the accumulator's type, and back (round to nearest even).
template <class Acc>
Acc load(kernels::DType t, const void* p, size_t i) {
  switch (t) {
    case kernels::DType::Float16:
      return kernels::arith::halfToFloat(static_cast<const uint16_t*>(p)[i]);
    case kernels::DType::Bfloat16:
      return kernels::arith::bfloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case kernels::DType::Float32:
      return static_cast<const float*>(p)[i];
    default:
      return static_cast<Acc>(static_cast<const double*>(p)[i]);
  }
}

template <class Acc>
void store(kernels::DType t, void* p, size_t i, Acc v) {
  switch (t) {
    case kernels::DType::Float16:
      static_cast<uint16_t*>(p)[i] = kernels::arith::floatToHalf(static_cast<float>(v));
      break;
    case kernels::DType::Bfloat16:
      static_cast<uint16_t*>(p)[i] = kernels::arith::floatToBfloat16(static_cast<float>(v));
      break;
    case kernels::DType::Float32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(p)[i] = static_cast<double>(v);
  }
}

template <class Acc>
void weightedSum(const MoeRoute& r, const void* packed, const float* w, kernels::DType t, size_t hidden, void* out) {
  std::vector<Acc> acc(hidden);
  for (size_t tok = 0; tok < r.tokens; ++tok) {
    std::fill(acc.begin(), acc.end(), Acc{0});
    for (uint32_t s = 0; s < r.k; ++s) {
      const int64_t row = r.slotRow[tok * r.k + s];
      if (row < 0) continue;
      const Acc weight = static_cast<Acc>(w[tok * r.k + s]);
      const size_t base = static_cast<size_t>(row) * hidden;
      for (size_t h = 0; h < hidden; ++h) acc[h] = std::fma(weight, load<Acc>(t, packed, base + h), acc[h]);
    }
    for (size_t h = 0; h < hidden; ++h) store<Acc>(t, out, tok * hidden + h, acc[h]);
  }
}

}  // namespace

void combineRows(const MoeRoute& r, const void* packed, const float* weights, kernels::DType t, size_t hidden,
                 void* out) {
  const size_t rowBytes = hidden * kernels::dtypeSize(t);
  if (!weights) {
    auto* o = static_cast<char*>(out);
    for (size_t i = 0; i < r.tokens * r.k; ++i) {
      const int64_t row = r.slotRow[i];
      if (row < 0) {
        std::memset(o + i * rowBytes, 0, rowBytes);
      } else {
        std::memcpy(o + i * rowBytes, static_cast<const char*>(packed) + static_cast<size_t>(row) * rowBytes,
                    rowBytes);
      }
    }
    return;
  }
  if (t == kernels::DType::Float64) {
    weightedSum<double>(r, packed, weights, t, hidden, out);
  } else {
    weightedSum<float>(r, packed, weights, t, hidden, out);
  }
}

}  // namespace gyre::collectives
