// A seeded generator whose sequence is the same with every standard library:
// std::normal_distribution's algorithm is the library's choice, and a run
// must reproduce bit for bit wherever it is built (and, later, on every
// data-parallel rank that initializes the same model).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace gyre::harness {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}

  // splitmix64: a full-period 64-bit sequence, good enough for initialization
  // and sampling, and small enough to read.
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  // In [0, 1), from the top 24 bits so that every value is exact in float.
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }

  // Box-Muller in double, one value per call: simple over fast.
  float normal(float mean, float stddev) {
    double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1p-53;  // (0, 1]: log stays finite
    double u2 = static_cast<double>(next() >> 11) * 0x1p-53;
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    return mean + stddev * static_cast<float>(z);
  }

  // In [0, n): modulo bias is below 2^-32 for the sizes the harness draws.
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

}  // namespace gyre::harness
