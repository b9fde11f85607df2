// Walking a View (plan.h): the runs of elements a packed range of it covers.
#pragma once

#include <algorithm>
#include <utility>

#include "collectives/plan.h"

namespace gyre::collectives {

// Calls f(buf, at, pos, len) for each run of the view's packed elements
// [off, off + count): len elements at element `at` of buffer buf, which are
// the range's elements [pos, pos + len), in packed order.
template <class F>
void forEachViewRun(const View& v, size_t off, size_t count, F&& f) {
  if (count == 0 || v.rowLen == 0) return;
  size_t row = off / v.rowLen, col = off % v.rowLen, done = 0;
  while (done < count) {
    size_t segStart = 0;
    for (uint8_t j = 0; j < v.segments && done < count; ++j) {
      const ViewSegment& s = v.seg[j];
      if (col < segStart + s.len) {
        const size_t within = col - segStart, take = std::min(s.len - within, count - done);
        f(s.buf, s.base + row * s.stride + within, done, take);
        done += take;
        col += take;
      }
      segStart += s.len;
    }
    ++row;
    col = 0;
  }
}

// The elements of buffer buf that the packed range [off, off + count)
// reaches into, as [lo, hi) (whole rows: an over-estimate within them);
// {0, 0} when it reaches none.
inline std::pair<size_t, size_t> viewSpan(const View& v, BufId buf, size_t off, size_t count) {
  if (count == 0 || v.rowLen == 0) return {0, 0};
  const size_t first = off / v.rowLen, last = (off + count - 1) / v.rowLen;
  size_t lo = SIZE_MAX, hi = 0;
  for (uint8_t j = 0; j < v.segments; ++j) {
    const ViewSegment& s = v.seg[j];
    if (s.buf != buf) continue;
    lo = std::min(lo, s.base + first * s.stride);
    hi = std::max(hi, s.base + last * s.stride + s.len);
  }
  return lo < hi ? std::pair{lo, hi} : std::pair{size_t{0}, size_t{0}};
}

}  // namespace gyre::collectives
