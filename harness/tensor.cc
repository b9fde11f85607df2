#include "harness/tensor.h"

#include <algorithm>
#include <stdexcept>

namespace gyre::harness {

size_t elementsOf(std::span<const int> shape) {
  size_t n = 1;
  for (int d : shape) {
    if (d < 0) throw std::invalid_argument("a tensor's dimension is negative");
    n *= static_cast<size_t>(d);
  }
  return n;
}

void Tensor::resize(std::span<const int> shape) {
  shape_.assign(shape.begin(), shape.end());
  data_.assign(elementsOf(shape), 0.0f);
}

void Tensor::zero() { std::fill(data_.begin(), data_.end(), 0.0f); }

}  // namespace gyre::harness
