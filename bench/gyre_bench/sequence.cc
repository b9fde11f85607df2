#include "bench/gyre_bench/sequence.h"

#include <cstring>
#include <vector>

#include "bench/exact_values.h"

namespace gyre::bench {

namespace {

size_t kvHeadsOf(const Options& o) {
  return o.seqKvHeads ? size_t(o.seqKvHeads) : size_t(o.seqHeads);
}

// Heads per token on the sequence side.
size_t widthOf(const Options& o) {
  return ((o.seqParts & gyreSeqQ) ? size_t(o.seqHeads) : 0) +
         ((o.seqParts & gyreSeqK) ? kvHeadsOf(o) : 0) +
         ((o.seqParts & gyreSeqV) ? kvHeadsOf(o) : 0);
}

// The sequence side's head of each of rank r's share heads.
std::vector<size_t> columnsOf(const Call& c, int r) {
  const gyreSeqLayout_t l = seqLayoutOf(c);
  int qFirst = 0, qCount = 0, kvFirst = 0, kvCount = 0;
  gyreSeqHeads(&l, c.nranks, r, &qFirst, &qCount, &kvFirst, &kvCount);
  const Options& o = *c.opt;
  std::vector<size_t> cols;
  size_t at = 0;
  if (o.seqParts & gyreSeqQ) {
    for (int j = 0; j < qCount; ++j) cols.push_back(size_t(qFirst + j));
    at = size_t(o.seqHeads);
  }
  for (int part : {gyreSeqK, gyreSeqV}) {
    if (!(o.seqParts & part)) continue;
    for (int j = 0; j < kvCount; ++j) cols.push_back(at + size_t(kvFirst + j));
    at += kvHeadsOf(o);
  }
  return cols;
}

size_t esz(const Call& c) { return test::dtypeBytes(c.opt->dtype); }

// The sequence's pattern at (token T, sequence-side head w, element d).
double patternOf(const Call& c, size_t T, size_t w, size_t d) {
  return test::patternAt((T * widthOf(*c.opt) + w) * c.opt->seqHeadDim + d, c.opt->dtype, 0);
}

// A key/value head several ranks hold: rank q's copy, 0 to 3, so that the
// holders' sum is exact in every type (int8 up to 42 holders).
double smallOf(size_t T, size_t w, size_t d, int q) {
  return double((T * 7 + w * 3 + d + size_t(q) * 5) % 4);
}

// Compares element i of buf with v as the type stores it.
bool differs(const Call& c, const unsigned char* buf, size_t i, double v) {
  alignas(8) unsigned char want[8];
  test::storeElement(want, 0, c.opt->dtype, v);
  return std::memcmp(buf + i * esz(c), want, esz(c)) != 0;
}

void shapeSeq(Call& c, size_t elems, bool toHeads) {
  const size_t tokenElems = widthOf(*c.opt) * c.opt->seqHeadDim;
  c.tokens = tokenElems ? elems / tokenElems : 0;
  const size_t seqSide = c.tokens * tokenElems;
  const size_t headSide =
      c.tokens * size_t(c.nranks) * columnsOf(c, c.rank).size() * c.opt->seqHeadDim;
  c.count = seqSide;
  c.sendElems = toHeads ? seqSide : headSide;
  c.recvElems = toHeads ? headSide : seqSide;
}

}  // namespace

gyreSeqLayout_t seqLayoutOf(const Call& c) {
  const Options& o = *c.opt;
  return gyreSeqLayout_t{
      o.seqHeads, o.seqKvHeads, o.seqHeadDim, o.seqParts, c.tokens * size_t(c.nranks), nullptr};
}

std::string describeSeqOptions(const Options& o) {
  std::string parts;
  for (auto [bit, name] : {std::pair{gyreSeqQ, "q"}, {gyreSeqK, "k"}, {gyreSeqV, "v"}})
    if (o.seqParts & bit) parts += name;
  return "heads " + std::to_string(o.seqHeads) + ", kv heads " + std::to_string(kvHeadsOf(o)) +
         ", head dim " + std::to_string(o.seqHeadDim) + ", parts " + parts;
}

void shapeSeqToHeads(Call& c, size_t elems) { shapeSeq(c, elems, true); }
void shapeHeadsToSeq(Call& c, size_t elems) { shapeSeq(c, elems, false); }

void fillSeqToHeads(Call& c) {
  const size_t width = widthOf(*c.opt), dim = c.opt->seqHeadDim, first = size_t(c.rank) * c.tokens;
  for (size_t t = 0; t < c.tokens; ++t)
    for (size_t w = 0; w < width; ++w)
      for (size_t d = 0; d < dim; ++d)
        test::storeElement(c.send, (t * width + w) * dim + d, c.opt->dtype,
                           patternOf(c, first + t, w, d));
}

size_t wrongSeqToHeads(Call& c) {
  const std::vector<size_t> cols = columnsOf(c, c.rank);
  const size_t dim = c.opt->seqHeadDim, S = c.tokens * size_t(c.nranks);
  size_t wrong = 0;
  for (size_t T = 0; T < S; ++T)
    for (size_t j = 0; j < cols.size(); ++j)
      for (size_t d = 0; d < dim; ++d)
        wrong += differs(c, c.recv, (T * cols.size() + j) * dim + d, patternOf(c, T, cols[j], d));
  return wrong;
}

gyreResult_t runSeqToHeads(Call& c) {
  const gyreSeqLayout_t l = seqLayoutOf(c);
  return gyreSeqToHeads(c.send, c.recv, &l, c.opt->dtype, c.comm, c.stream);
}

namespace {

// Every rank's columns, and how many ranks hold each sequence-side head.
struct Holders {
  std::vector<std::vector<size_t>> cols;
  std::vector<int> count;
  Holders(const Call& c) : count(widthOf(*c.opt), 0) {
    for (int r = 0; r < c.nranks; ++r) {
      cols.push_back(columnsOf(c, r));
      for (size_t w : cols.back()) ++count[w];
    }
  }
};

}  // namespace

void fillHeadsToSeq(Call& c) {
  const Holders h(c);
  const std::vector<size_t>& cols = h.cols[c.rank];
  const size_t dim = c.opt->seqHeadDim, S = c.tokens * size_t(c.nranks);
  for (size_t T = 0; T < S; ++T)
    for (size_t j = 0; j < cols.size(); ++j)
      for (size_t d = 0; d < dim; ++d) {
        const size_t w = cols[j];
        test::storeElement(c.send, (T * cols.size() + j) * dim + d, c.opt->dtype,
                           h.count[w] > 1 ? smallOf(T, w, d, c.rank) : patternOf(c, T, w, d));
      }
}

size_t wrongHeadsToSeq(Call& c) {
  const Holders h(c);
  const size_t width = widthOf(*c.opt), dim = c.opt->seqHeadDim, first = size_t(c.rank) * c.tokens;
  size_t wrong = 0;
  for (size_t t = 0; t < c.tokens; ++t)
    for (size_t w = 0; w < width; ++w)
      for (size_t d = 0; d < dim; ++d) {
        const size_t T = first + t;
        double want = 0;
        if (h.count[w] > 1) {
          for (int q = 0; q < c.nranks; ++q)
            for (size_t x : h.cols[q]) want += x == w ? smallOf(T, w, d, q) : 0;
        } else {
          want = patternOf(c, T, w, d);
        }
        wrong += differs(c, c.recv, (t * width + w) * dim + d, want);
      }
  return wrong;
}

gyreResult_t runHeadsToSeq(Call& c) {
  const gyreSeqLayout_t l = seqLayoutOf(c);
  return gyreHeadsToSeq(c.send, c.recv, &l, c.opt->dtype, c.comm, c.stream);
}

}  // namespace gyre::bench
