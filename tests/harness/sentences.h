// The text the multi-process harness tests train on (dp_rank.cc,
// pipeline_rank.cc): sentences with a little variety, so that the loss has
// something to learn, the same bytes on every rank and every run.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>

namespace gyre::harness::test {

inline std::string sentences() {
  const char* words[] = {"the", "quick", "brown",  "fox",   "jumps", "over", "lazy", "dog",
                         "and", "cat",   "sleeps", "under", "a",     "warm", "sun"};
  std::string text;
  uint64_t x = 99;
  while (text.size() < 20000) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(x >> 33) % std::size(words)];
    text += ((x >> 20) % 7 == 0) ? ". " : " ";
  }
  return text;
}

}  // namespace gyre::harness::test
