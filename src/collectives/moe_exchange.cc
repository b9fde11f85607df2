#include "collectives/moe_exchange.h"

#include "collectives/steps.h"

namespace gyre::collectives {

namespace {

// A message's block count (in its tag's root): rows, or counts' entries.
void setBlock(Step& s, uint64_t n) { s.blockCount = n; }

}  // namespace

void buildMoeCounts(const MoeRoute& r, PlanEnv& env, Plan& plan) {
  plan.reset("pairwise");
  const int n = env.nranks(), me = env.rank();
  plan.rank = me;
  const size_t mine = 2 * r.localCount();
  for (int k = 1; k < n; ++k) plan.addPeer((me + k) % n);
  if (n > 1) env.chunkBytes(plan.peers);  // connects them (a counts message is small: one piece)
  plan.inputElems = r.countsOut.size();
  plan.outputElems = r.countsIn.size();
  add(plan, Prim::Copy, BufId::Input, r.countsAt[me], BufId::Output, static_cast<size_t>(me) * mine,
      r.countsAt[me + 1] - r.countsAt[me]);
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int to = (me + k) % n;
    const size_t len = r.countsAt[to + 1] - r.countsAt[to];
    setBlock(add(plan, Prim::Send, BufId::Input, r.countsAt[to], BufId::Output, 0, len, to), len);
  }
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int from = (me - k + n) % n;
    setBlock(add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, static_cast<size_t>(from) * mine, mine, -1, from),
             mine);
  }
  plan.closeLane();
}

void buildMoeRows(const MoeRoute& r, bool dispatch, size_t hidden, const CallRequest& req, PlanEnv& env,
                  Plan& plan) {
  plan.reset("pairwise");
  const int n = env.nranks(), me = env.rank();
  const size_t nn = static_cast<size_t>(n), local = r.localCount();
  plan.rank = me;
  for (int k = 1; k < n; ++k) plan.addPeer((me + k) % n);
  const size_t chunk = n > 1 ? pairwisePieceElems(req, env, plan.peers) : 1;
  plan.inputElems = (dispatch ? r.packedRows() : r.recvTotal) * hidden;
  plan.outputElems = (dispatch ? r.recvTotal : r.packedRows()) * hidden;
  // The blocks between this rank and q, in the order both ends list them:
  // q's experts (dispatch, sending) or ours (receiving), increasing.
  // packedAt: a block of our packed rows; groupedAt: one of the grouped.
  auto sendBlocks = [&](int q, auto&& f) {
    if (dispatch) {
      for (uint32_t e : r.localOf[static_cast<size_t>(q)]) f(r.blockFirst[e], r.sent[e]);
    } else {
      for (size_t l = 0; l < local; ++l) f(r.recvFirst[l * nn + q], r.recvRows[l * nn + q]);
    }
  };
  auto recvBlocks = [&](int q, auto&& f) {
    if (dispatch) {
      for (size_t l = 0; l < local; ++l) f(r.recvFirst[l * nn + q], r.recvRows[l * nn + q]);
    } else {
      for (uint32_t e : r.localOf[static_cast<size_t>(q)]) f(r.blockFirst[e], r.sent[e]);
    }
  };
  // Our own blocks: copies (both lists name them in the same order).
  std::vector<std::pair<size_t, size_t>> from, to;
  sendBlocks(me, [&](size_t at, size_t rows) { from.emplace_back(at, rows); });
  recvBlocks(me, [&](size_t at, size_t rows) { to.emplace_back(at, rows); });
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i].second)
      add(plan, Prim::Copy, BufId::Input, from[i].first * hidden, BufId::Output, to[i].first * hidden,
          from[i].second * hidden);
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int q = (me + k) % n;
    sendBlocks(q, [&](size_t at, size_t rows) {
      forPieces(rows * hidden, chunk, [&](size_t off, size_t len) {
        setBlock(add(plan, Prim::Send, BufId::Input, at * hidden + off, BufId::Output, 0, len, q), rows);
      });
    });
  }
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int q = (me - k + n) % n;
    recvBlocks(q, [&](size_t at, size_t rows) {
      forPieces(rows * hidden, chunk, [&](size_t off, size_t len) {
        setBlock(add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, at * hidden + off, len, -1, q), rows);
      });
    });
  }
  plan.closeLane();
}

MoePipelinedDispatch::MoePipelinedDispatch(MoeRoute& r, size_t hidden, size_t outputRows, const CallRequest& req,
                                           PlanEnv& env, Plan& plan, std::vector<std::vector<char>>& staging)
    : r_(r), plan_(plan), hidden_(hidden), elemSize_(req.elemSize), outputRows_(outputRows), staging_(staging) {
  plan.reset("pairwise-counts-ahead");
  const int n = env.nranks(), me = env.rank();
  const size_t nn = static_cast<size_t>(n);
  plan.rank = me;
  for (int k = 1; k < n; ++k) plan.addPeer((me + k) % n);
  chunk_ = n > 1 ? pairwisePieceElems(req, env, plan.peers) : 1;
  if (staging_.size() < nn) staging_.resize(nn);
  extra_.assign(2 + nn, nullptr);
  extra_[0] = r.countsOut.data();
  extra_[1] = r.countsIn.data();
  arrived_.assign(nn, false);
  waiting_ = nn - 1;
  plan.inputElems = r.packedRows() * hidden;
  plan.outputElems = outputRows * hidden;
  // Counts are uint64, counted here in the call's elements (whose size
  // divides 8).
  const size_t perCount = sizeof(uint64_t) / elemSize_, mine = 2 * r.localCount();
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int q = (me + k) % n;
    const size_t entries = r.countsAt[q + 1] - r.countsAt[q];
    setBlock(add(plan, Prim::Send, extraBuffer(0), r.countsAt[q] * perCount, BufId::Output, 0, entries * perCount, q),
             entries);
    for (uint32_t e : r.localOf[static_cast<size_t>(q)]) {
      const size_t at = r.blockFirst[e], rows = r.sent[e];
      forPieces(rows * hidden, chunk_, [&](size_t off, size_t len) {
        setBlock(add(plan, Prim::Send, BufId::Input, at * hidden + off, BufId::Output, 0, len, q), rows);
      });
    }
  }
  for (int k = 1; k < n; ++k) {
    plan.beginLane();
    const int q = (me - k + n) % n;
    setBlock(add(plan, Prim::Recv, BufId::Output, 0, extraBuffer(1), static_cast<size_t>(q) * mine * perCount,
                 mine * perCount, -1, q),
             mine);
    add(plan, Prim::Resolve, BufId::Output, 0, BufId::Output, 0, 0, -1, q);
  }
  plan.closeLane();
}

LaneResolver::Range MoePipelinedDispatch::resolve(const Step& s) {
  const size_t q = static_cast<size_t>(s.recvPeer), nn = static_cast<size_t>(r_.nranks), local = r_.localCount();
  if (!arrived_[q]) {
    arrived_[q] = true;
    --waiting_;
  }
  if (waiting_) return Range{};
  if (!settled_) {  // every count is in: where every row goes
    settleReceived(r_);
    direct_ = r_.recvTotal <= outputRows_;
    settled_ = true;
  }
  const auto begin = static_cast<uint32_t>(plan_.steps.size());
  if (direct_) {
    for (size_t l = 0; l < local; ++l) {
      const size_t rows = r_.recvRows[l * nn + q], at = r_.recvFirst[l * nn + q];
      forPieces(rows * hidden_, chunk_, [&](size_t off, size_t len) {
        setBlock(add(plan_, Prim::Recv, BufId::Output, 0, BufId::Output, at * hidden_ + off, len, -1,
                     static_cast<int>(q)),
                 rows);
      });
    }
    return Range{true, begin, static_cast<uint32_t>(plan_.steps.size())};
  }
  // Too small an output: this source's rows, in its order, to staging.
  size_t total = 0;
  for (size_t l = 0; l < local; ++l) total += r_.recvRows[l * nn + q];
  staging_[q].resize(total * hidden_ * elemSize_);
  extra_[2 + q] = staging_[q].data();
  size_t at = 0;
  for (size_t l = 0; l < local; ++l) {
    const size_t rows = r_.recvRows[l * nn + q];
    forPieces(rows * hidden_, chunk_, [&](size_t off, size_t len) {
      setBlock(add(plan_, Prim::Recv, BufId::Output, 0, extraBuffer(static_cast<uint16_t>(2 + q)),
                   at * hidden_ + off, len, -1, static_cast<int>(q)),
               rows);
    });
    at += rows;
  }
  return Range{true, begin, static_cast<uint32_t>(plan_.steps.size())};
}

}  // namespace gyre::collectives
