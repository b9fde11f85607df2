// Mixture-of-experts routing (gyreMoeDispatch, gyreMoeCombine; docs/moe.md):
// which of this rank's token slots go to which expert's rank, in which
// order, and which are dropped for capacity; where the rows that arrive
// land. Pure functions of the choices and the counts, so core sizes the
// buffers with them and the plan builders (moe_exchange.h) cut blocks from
// them, and the tests check them without a peer.
//
// The order everything keeps: a block is one (destination rank, expert)
// pair. This rank's packed rows go by destination rank, then by that
// rank's experts in increasing id, then in priority order: every slot-0
// choice in token order, then slot 1, ... (GShard's rule: first choices
// win capacity over second ones). On an expert's rank the rows arrive
// grouped by local expert, then by source rank, each source's in its
// priority order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.h"

namespace gyre::collectives {

constexpr uint32_t kMaxMoeExperts = (1u << 16) - 1;
constexpr uint32_t kMaxMoeTopK = 255;
constexpr size_t kMaxMoeHidden = (size_t{1} << 24) - 1;

struct MoeRoute {
  int nranks = 1, rank = 0;
  uint32_t experts = 0, k = 0;
  size_t tokens = 0;
  uint64_t capacity = 0;                       // per expert per source rank; 0: unlimited
  std::vector<int> expertRank;                 // by expert
  std::vector<std::vector<uint32_t>> localOf;  // by rank: its experts, increasing
  std::vector<uint32_t> localIndex;            // by expert: its place among its rank's

  // The sending side (this rank's tokens).
  std::vector<int64_t> slotRow;    // tokens x k: packed row, or -1 (no expert, or dropped)
  std::vector<uint64_t> sent;      // by expert: rows kept for it
  std::vector<uint64_t> dropped;   // by expert: slots dropped for capacity
  std::vector<size_t> blockFirst;  // by expert: its block's first packed row
  std::vector<size_t> rankFirst;   // nranks + 1: each destination's first packed row

  // The counts message to each rank: for each of its experts, kept then
  // dropped (uint64): countsOut[countsAt[q] ...], 2 x localOf[q].size().
  std::vector<uint64_t> countsOut;
  std::vector<size_t> countsAt;  // nranks + 1

  // The receiving side, once the counts have come (received): from each
  // source, 2 x local experts (kept, dropped), by source rank.
  bool received = false;
  std::vector<uint64_t> countsIn;
  std::vector<uint64_t> recvRows;     // local x nranks: rows expert l got from source q
  std::vector<size_t> recvFirst;      // local x nranks: where they start in the output
  std::vector<uint64_t> recvDropped;  // by local expert: slots the sources dropped
  size_t recvTotal = 0;

  size_t localCount() const { return localOf[static_cast<size_t>(rank)].size(); }
  size_t packedRows() const { return rankFirst.back(); }
  uint64_t code = 0;  // the shape's fingerprint (moeShapeCode), without H
};

// choices: tokens x k expert ids (-1: none), already checked to lie in
// [-1, experts); expertRank: experts entries in [0, nranks).
MoeRoute routeTokens(int nranks, int rank, uint32_t experts, uint32_t k, size_t tokens, uint64_t capacity,
                     const std::vector<int>& expertRank, const int32_t* choices);
// The counts from every source (countsIn filled): the receiving side.
void settleReceived(MoeRoute& r);

// The shape as one number, for the call's tag, so that ranks that disagree
// are told so by name: experts (16 bits), k (8), the hidden size (24; 0 for
// the counts' exchange) and a 16-bit fingerprint of the expert map and the
// capacity.
uint64_t moeShapeCode(const MoeRoute& r, size_t hidden);
// "8 experts, top-2, hidden 64, map and capacity 1a2b" from a code.
std::string describeMoeShape(uint64_t code);

// Gathers the kept slots' rows into their packed places: input is [tokens]
// [hidden] (each slot sends its token's row), or with perSlot [tokens][k]
// [hidden] (each slot its own row: the backward of a combine).
void packRows(const MoeRoute& r, const void* input, bool perSlot, size_t rowBytes, void* packed);
// Our own rows (packed, this rank's blocks) to their places in the output.
void copyOwnRows(const MoeRoute& r, const void* packed, size_t rowBytes, void* output);
// The packed rows, come back from the experts, to the tokens. weights
// ([tokens][k] float) null: out is [tokens][k][hidden], each slot its row
// (zero where dropped or without an expert). Otherwise out is [tokens]
// [hidden], the sum over kept slots, in slot order, of weight x row,
// accumulated with fused multiply-adds in float (double for float64) and
// rounded to the type once (floating types only).
void combineRows(const MoeRoute& r, const void* packed, const float* weights, kernels::DType t, size_t hidden,
                 void* out);

}  // namespace gyre::collectives
