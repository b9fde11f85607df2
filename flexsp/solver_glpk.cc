// The MIP (mip.h) with GLPK's branch and bound: the LP relaxation by the
// simplex, then glp_intopt within what is left of the time limit, with the
// greedy seed handed in as the first incumbent (so a limit that comes early
// still leaves a solution no worse than the greedy's).
#include <glpk.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <map>

#include "flexsp/mip.h"

namespace gyre::flexsp {

namespace {

// One potential group: a size and an index among the groups of that size.
struct Slot {
  int size = 1, sizeIndex = 0, index = 0;
  int used = 0;                // column of used(g)
  std::vector<int> countCols;  // column of n(b, g) per bucket; 0 where the bucket cannot fit
};

struct Model {
  glp_prob* lp = glp_create_prob();
  int makespan = 0;  // the column of C
  std::vector<Slot> slots;
  ~Model() { glp_delete_prob(lp); }
};

// Adds a row bounded as `type` (GLP_UP, GLP_LO, GLP_FX) with these
// (column, coefficient) pairs.
void addRow(glp_prob* lp, int type, double bound,
            const std::vector<std::pair<int, double>>& terms) {
  const int row = glp_add_rows(lp, 1);
  glp_set_row_bnds(lp, row, type, bound, bound);
  std::vector<int> cols(1, 0);
  std::vector<double> vals(1, 0);
  for (auto [c, v] : terms) cols.push_back(c), vals.push_back(v);
  glp_set_mat_row(lp, row, static_cast<int>(terms.size()), cols.data(), vals.data());
}

int addColumn(glp_prob* lp, int kind, double lo, double hi) {
  const int col = glp_add_cols(lp, 1);
  glp_set_col_kind(lp, col, kind);
  glp_set_col_bnds(lp, col, lo == hi ? GLP_FX : GLP_DB, lo, hi);
  return col;
}

void build(Model& m, const MipInput& in) {
  const size_t buckets = in.lengths.size();
  glp_set_obj_dir(m.lp, GLP_MIN);
  m.makespan = glp_add_cols(m.lp, 1);
  glp_set_obj_coef(m.lp, m.makespan, 1);
  std::vector<std::pair<int, double>> cover;
  std::vector<std::vector<std::pair<int, double>>> assigned(buckets);
  // Two bounds the relaxation lacks, both implied by the program: the
  // groups' rank-seconds (size x time) fit in world x C, and no group is
  // faster than its slowest sequence's best size. Without them the LP
  // spreads the work over every potential group and its bound is useless.
  std::vector<std::pair<int, double>> area{{m.makespan, -double(in.worldSize)}};
  double longest = 0;
  for (size_t b = 0; b < buckets; ++b) {
    double fastest = DBL_MAX;
    for (int p = 1, k = 0; p <= in.largestGroup; p *= 2, ++k)
      if (in.lengths[b] <= int64_t{p} * in.memoryTokens)
        fastest = std::min(fastest, in.seconds[b][static_cast<size_t>(k)]);
    if (in.counts[b] > 0) longest = std::max(longest, fastest);
  }
  glp_set_col_bnds(m.lp, m.makespan, GLP_LO, longest, 0);
  for (int p = 1, k = 0; p <= in.largestGroup; p *= 2, ++k) {
    const int64_t room = int64_t{p} * in.memoryTokens;
    int fitting = 0;
    for (size_t b = 0; b < buckets; ++b)
      if (in.lengths[b] <= room) fitting += in.counts[b];
    const int groups = std::min(in.worldSize / p, fitting);
    for (int j = 0; j < groups; ++j) {
      Slot s{p, k, j, addColumn(m.lp, GLP_BV, 0, 1), std::vector<int>(buckets, 0)};
      cover.emplace_back(s.used, p);
      std::vector<std::pair<int, double>> memory{{s.used, -double(room)}}, time{{m.makespan, -1}};
      for (size_t b = 0; b < buckets; ++b) {
        if (in.lengths[b] > room) continue;
        const int most = static_cast<int>(std::min<int64_t>(in.counts[b], room / in.lengths[b]));
        const int c = s.countCols[b] = addColumn(m.lp, GLP_IV, 0, most);
        assigned[b].emplace_back(c, 1);
        memory.emplace_back(c, double(in.lengths[b]));
        time.emplace_back(c, in.seconds[b][static_cast<size_t>(k)]);
        area.emplace_back(c, p * in.seconds[b][static_cast<size_t>(k)]);
      }
      addRow(m.lp, GLP_UP, 0, memory);
      addRow(m.lp, GLP_UP, 0, time);
      if (j > 0) {  // symmetry: used in index order, with non-increasing times
        const Slot& prev = m.slots.back();
        addRow(m.lp, GLP_LO, 0, {{prev.used, 1}, {s.used, -1}});
        std::vector<std::pair<int, double>> order;
        for (size_t b = 0; b < buckets; ++b)
          if (s.countCols[b]) {
            order.emplace_back(prev.countCols[b], in.seconds[b][static_cast<size_t>(k)]);
            order.emplace_back(s.countCols[b], -in.seconds[b][static_cast<size_t>(k)]);
          }
        addRow(m.lp, GLP_LO, 0, order);
      }
      m.slots.push_back(std::move(s));
    }
  }
  addRow(m.lp, GLP_UP, in.worldSize, cover);
  addRow(m.lp, GLP_UP, 0, area);
  for (size_t b = 0; b < buckets; ++b) addRow(m.lp, GLP_FX, in.counts[b], assigned[b]);
}

// A seed as column values (1-based, as GLPK takes them); empty when it
// does not map onto the slots (a shape the program does not allow) or
// breaks a memory row.
std::vector<double> seedColumns(const Model& m, const MipInput& in,
                                const std::vector<MipGroup>& seed) {
  if (seed.empty()) return {};
  std::vector<double> x(static_cast<size_t>(glp_get_num_cols(m.lp)) + 1, 0);
  std::map<int, std::vector<std::pair<double, const MipGroup*>>>
      bySize;  // groups by load, per size
  for (const MipGroup& g : seed) {
    int64_t tokens = 0;
    for (size_t b = 0; b < g.counts.size(); ++b) tokens += g.counts[b] * in.lengths[b];
    if (tokens > int64_t{g.size} * in.memoryTokens) return {};
    int k = 0;
    while ((1 << k) < g.size) ++k;
    double load = 0;
    int n = 0;
    for (size_t b = 0; b < g.counts.size(); ++b)
      load += g.counts[b] * in.seconds[b][static_cast<size_t>(k)], n += g.counts[b];
    if (n > 0) bySize[g.size].emplace_back(load, &g);
  }
  double makespan = 0;
  for (auto& [size, groups] : bySize) {
    std::stable_sort(groups.begin(), groups.end(),
                     [](auto& a, auto& b) { return a.first > b.first; });
    size_t next = 0;
    for (const Slot& s : m.slots) {
      if (s.size != size || next == groups.size()) continue;
      const MipGroup& g = *groups[next++].second;
      x[static_cast<size_t>(s.used)] = 1;
      for (size_t b = 0; b < g.counts.size(); ++b) {
        if (g.counts[b] == 0) continue;
        if (!s.countCols[b]) return {};
        x[static_cast<size_t>(s.countCols[b])] = g.counts[b];
      }
      makespan = std::max(makespan, groups[next - 1].first);
    }
    if (next != groups.size()) return {};
  }
  x[static_cast<size_t>(m.makespan)] = makespan;
  return x;
}

struct Callback {
  std::vector<std::vector<double>> seeds;
  bool offered = false;
  int accepted = 0;
  double gap = DBL_MAX;
};

void callback(glp_tree* tree, void* info) {
  auto* cb = static_cast<Callback*>(info);
  if (glp_ios_reason(tree) == GLP_IHEUR && !cb->offered) {
    cb->offered = true;  // at the root, once: GLPK keeps the best it is given
    for (const auto& x : cb->seeds) cb->accepted += glp_ios_heur_sol(tree, x.data()) == 0;
  }
  cb->gap = glp_ios_mip_gap(tree);
}

MipResult solve(const MipInput& in) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto msLeft = [&] {
    return std::max(1, static_cast<int>((in.timeLimitSeconds - elapsed()) * 1000));
  };
  MipResult r;
  glp_term_out(GLP_OFF);  // GLPK prints to stdout otherwise
  Model m;
  build(m, in);
  Callback cb;
  for (const auto& seed : in.seeds)
    if (auto x = seedColumns(m, in, seed); !x.empty()) cb.seeds.push_back(std::move(x));

  glp_smcp lp;
  glp_init_smcp(&lp);
  lp.msg_lev = GLP_MSG_OFF;
  lp.tm_lim = msLeft();
  glp_scale_prob(m.lp, GLP_SF_AUTO);
  const int lpRet = glp_simplex(m.lp, &lp);
  const bool lpOptimal = lpRet == 0 && glp_get_status(m.lp) == GLP_OPT;
  if (!lpOptimal) {
    r.elapsedSeconds = elapsed();
    const bool infeasible =
        lpRet == 0 && (glp_get_status(m.lp) == GLP_NOFEAS || glp_get_status(m.lp) == GLP_INFEAS);
    r.status = lpRet == GLP_ETMLIM ? MipResult::Status::NoSolution
               : infeasible        ? MipResult::Status::Infeasible
                                   : MipResult::Status::Failed;
    r.detail = "the LP relaxation ended with code " + std::to_string(lpRet) + ", status " +
               std::to_string(glp_get_status(m.lp));
    return r;
  }
  glp_iocp ip;
  glp_init_iocp(&ip);
  ip.msg_lev = GLP_MSG_OFF;
  ip.presolve = GLP_OFF;  // the callback's seed is in the original columns
  ip.tm_lim = msLeft();
  ip.cb_func = callback;
  ip.cb_info = &cb;
  ip.fp_heur = GLP_ON;
  // Pseudo-cost branching: on the sim's mixture batches (gyre-flexsp-sim
  // --compute-scale 100 --batches 4: 64 ranks, 1 s) its plans were 1.23x
  // faster than the default branching's, which rarely got past the greedy
  // seed; MIR cuts and best-projection backtracking did no better,
  // proximity search about half as well.
  ip.br_tech = GLP_BR_PCH;
  const int ret = glp_intopt(m.lp, &ip);
  const int status = glp_mip_status(m.lp);
  r.elapsedSeconds = elapsed();
  if (status == GLP_OPT && ret == 0) {
    r.status = MipResult::Status::Optimal;
  } else if (status == GLP_FEAS || status == GLP_OPT) {
    r.status = MipResult::Status::Feasible;
    r.gap = cb.gap;
  } else if (ret == GLP_ETMLIM) {
    r.status = MipResult::Status::NoSolution;
  } else if (status == GLP_NOFEAS) {
    r.status = MipResult::Status::Infeasible;
  } else {
    r.status = MipResult::Status::Failed;
    r.detail = "glp_intopt returned " + std::to_string(ret) + ", status " + std::to_string(status);
    return r;
  }
  if (r.status == MipResult::Status::Optimal || r.status == MipResult::Status::Feasible) {
    r.objective = glp_mip_obj_val(m.lp);
    for (const Slot& s : m.slots) {
      if (glp_mip_col_val(m.lp, s.used) < 0.5) continue;
      MipGroup g{s.size, std::vector<int>(in.lengths.size(), 0)};
      for (size_t b = 0; b < s.countCols.size(); ++b)
        if (s.countCols[b])
          g.counts[b] = static_cast<int>(glp_mip_col_val(m.lp, s.countCols[b]) + 0.5);
      r.groups.push_back(std::move(g));
    }
  }
  r.detail = std::to_string(cb.accepted) + " of " + std::to_string(in.seeds.size()) +
             " greedy seeds taken";
  return r;
}

}  // namespace

std::string solverName() { return std::string("GLPK ") + glp_version(); }

MipResult solveMip(const MipInput& in) {
  MipResult r = solve(in);
  // GLPK keeps an environment per thread until told: a planner thread that
  // ends would leave it behind.
  glp_free_env();
  return r;
}

}  // namespace gyre::flexsp
