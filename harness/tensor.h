// The harness's only container: an owning float buffer with a shape. Layers
// take raw pointers and sizes (as llm.c does), so this stays a buffer, not a
// framework: no strides, no views, no autograd.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

namespace gyre::harness {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::initializer_list<int> shape) { resize(shape); }
  explicit Tensor(std::span<const int> shape) { resize(shape); }

  // Zero-filled, so that a gradient buffer is ready to accumulate into.
  void resize(std::span<const int> shape);
  void resize(std::initializer_list<int> shape) {
    resize(std::span<const int>(shape.begin(), shape.size()));
  }
  void zero();

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }
  const std::vector<int>& shape() const { return shape_; }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }

 private:
  std::vector<int> shape_;
  std::vector<float> data_;
};

// Elements of a shape; the empty shape is a scalar.
size_t elementsOf(std::span<const int> shape);

}  // namespace gyre::harness
