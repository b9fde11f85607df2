// Strict parsing of the numbers and sizes that settings and command lines
// carry: the whole text must be the number, and a value out of range is an
// error naming the setting rather than a silent clamp or wrap.
#pragma once

#include <cstdint>
#include <string>

namespace gyre {

// Digits with an optional K, M or G (powers of 1024, an optional trailing B);
// throws Error(gyreInvalidArgument) naming `what` when malformed or when the
// value does not fit in 64 bits.
uint64_t parseSize(const std::string& text, const std::string& what);
// A decimal integer in [lo, hi]; throws like parseSize otherwise.
int64_t parseInt(const std::string& text, const std::string& what, int64_t lo, int64_t hi);

}  // namespace gyre
