// DeepSpeed-Ulysses' exchanges (gyreSeqToHeads, gyreHeadsToSeq;
// docs/sequence-parallel.md), planned as an AllToAll over strided slices:
// a lane per peer each way (sends to rank + k, receives from rank - k),
// which the executor advances a piece at a time in turn, so that every
// peer's slice of the same tokens moves close together in time.
//
// Seq to heads: rank r holds [tokens[r]][width][headDim]; peer q's block is
// every one of r's tokens, q's heads of each part (q, k, v), a view of r's
// input (plan.h) gathered straight into the message; it lands contiguous at
// q's rows for r. Heads to seq: the reverse; the contiguous rows leave as
// they are and are scattered into the tokens' heads as they arrive.
// A key/value head held by several ranks (grouped-query attention) is sent
// to each of them; on the way back the copies are summed, in rank order:
// the lowest rank's copy lands in place, the others in scratch, and once
// every message is in (the epilogue) each is added in, rank after rank.
#pragma once

#include "collectives/planner.h"

namespace gyre::collectives {

// The call's layout is req.seq; desc.kind says which way.
void buildSeqExchange(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
