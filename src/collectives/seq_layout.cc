#include "collectives/seq_layout.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/hash.h"

namespace gyre::collectives {

HeadShare headShare(const SeqLayout& l, int nranks, int rank) {
  const uint32_t n = static_cast<uint32_t>(nranks), r = static_cast<uint32_t>(rank);
  const uint32_t base = l.heads / n, extra = l.heads % n;
  HeadShare s;
  s.qCount = base + (r < extra ? 1 : 0);
  s.qFirst = r * base + std::min(r, extra);
  const uint32_t group = l.heads / l.kvHeads;  // query heads per key/value head
  s.kvFirst = s.qFirst / group;
  s.kvCount = s.qCount ? (s.qFirst + s.qCount - 1) / group + 1 - s.kvFirst : 0;
  return s;
}

size_t tokenHeads(const SeqLayout& l) {
  return ((l.parts & kSeqQ) ? l.heads : 0) + ((l.parts & kSeqK) ? l.kvHeads : 0) +
         ((l.parts & kSeqV) ? l.kvHeads : 0);
}

size_t shareHeads(const SeqLayout& l, const HeadShare& s) {
  return ((l.parts & kSeqQ) ? s.qCount : 0) + ((l.parts & kSeqK) ? s.kvCount : 0) +
         ((l.parts & kSeqV) ? s.kvCount : 0);
}

size_t partOffset(const SeqLayout& l, SeqPart p) {
  size_t at = 0;
  if (p == kSeqQ) return at;
  if (l.parts & kSeqQ) at += l.heads;
  if (p == kSeqK) return at;
  if (l.parts & kSeqK) at += l.kvHeads;
  return at;
}

namespace {
constexpr int kPartsShift = 24, kDimShift = 27, kTokensShift = 47;
constexpr uint64_t kTokensMask = ~uint64_t{0} << kTokensShift;
}  // namespace

uint64_t seqLayoutCode(const SeqLayout& l) {
  const uint64_t h = fnv1a(l.tokens.data(), l.tokens.size() * sizeof(size_t));
  const uint64_t print = (h ^ (h >> kTokensShift)) << kTokensShift;  // the hash's bits folded in
  return uint64_t{l.heads} | uint64_t{l.kvHeads} << 12 | uint64_t{l.parts & 7u} << kPartsShift |
         uint64_t{l.headDim} << kDimShift | print;
}

bool seqTokensDiffer(uint64_t a, uint64_t b) {
  return ((a ^ b) & kTokensMask) && !((a ^ b) & ~kTokensMask);
}

std::string describeSeqLayout(uint64_t code) {
  const uint64_t heads = code & 0xfff, kv = (code >> 12) & 0xfff, parts = (code >> kPartsShift) & 7,
                 dim = (code >> kDimShift) & kMaxSeqHeadDim;
  char print[16];
  std::snprintf(print, sizeof print, "%05llx",
                static_cast<unsigned long long>(code >> kTokensShift));
  std::string p;
  for (const auto& [bit, name] : {std::pair{kSeqQ, "q"}, {kSeqK, "k"}, {kSeqV, "v"}})
    if (parts & bit) p += (p.empty() ? "" : "+") + std::string(name);
  return std::to_string(heads) + " heads, " + std::to_string(kv) + " kv heads, head dim " +
         std::to_string(dim) + ", " + (p.empty() ? "no parts" : p) + ", tokens " + print;
}

}  // namespace gyre::collectives
