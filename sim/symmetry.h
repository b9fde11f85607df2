// Ranks that behave alike, so that one of each kind is simulated for all
// (the "aggregate symmetric steps"). A symmetry is a group of rank
// permutations that maps the cluster onto itself (every link onto a link of
// the same bandwidth and latency) and every rank's plan onto its image's
// plan: plan(g r) is plan(r) with every peer p read as g p. Then the whole
// run is the same under g: every rank of an orbit ends at the same time,
// and a message from g r to g p is the image of r's to p. The runner keeps
// one representative per orbit, delivers a message sent to a
// non-representative to the representative it is the image of, and counts
// each flow on a link with the number of its images that cross that link
// (FlowNetwork's weights), so max-min sharing gives it the rate every image
// gets: the times are the full simulation's, not an approximation.
//
// The groups tried are products of two cyclic or XOR groups, the ones the
// cluster model has when its hosts and leaves are uniform:
// - inside every host at once, the ranks' local indices rotated (l -> l + k)
//   or XORed (l -> l ^ k) in steps that keep the NICs' groups of ranks whole;
// - whole blocks of ranks (a leaf switch's, or a host's when one switch
//   holds them all) translated cyclically or XORed.
// Which one a call's plans keep is checked on the plans themselves
// (planKeepsSymmetry), never assumed.
#pragma once

#include <string>
#include <vector>

#include "collectives/plan.h"
#include "sim/cluster.h"

namespace gyre::sim {

class Symmetry {
 public:
  enum class Kind { None, Rotate, Xor };
  // inner acts on local indices in steps of `step` (ranks per host R);
  // outer on blocks of `block` ranks.
  Symmetry(int nranks, int ranksPerHost, Kind inner, int step, int block, Kind outer);

  int nranks() const { return n_; }
  // The group's elements (each orbit has this many ranks: the action is
  // free, no element but the identity fixes a rank).
  int order() const { return innerOrder_ * outerOrder_; }
  // Element e is (e % innerOrder) inside hosts, then (e / innerOrder) on
  // blocks: element 1 is the inner group's first step, innerOrder() the
  // outer's.
  int innerOrder() const { return innerOrder_; }
  int orbits() const { return n_ / order(); }
  // Element e applied to rank r.
  int apply(int e, int r) const;
  int inverse(int e) const;
  // The orbit's representative, and the element taking it to r.
  int representative(int r) const;
  int elementOf(int r) const;
  // g_of^-1 applied to r, g_of the element taking representative(of) to of.
  int pullBack(int r, int of) const { return apply(inverse(elementOf(of)), r); }
  // "16384 ranks as 256 orbits of 64 (leaf blocks of 256 translated)".
  std::string describe() const;

 private:
  int n_, R_, step_, block_;
  Kind inner_, outer_;
  int innerOrder_, outerOrder_;
};

// The symmetries the cluster has, the largest groups first; none for a
// cluster whose leaves are not all alike (the last leaf partly filled).
std::vector<Symmetry> clusterSymmetries(const ClusterSpec& spec);

// Whether plan `image` (rank g r's) is plan `original` (rank r's) with its
// peers mapped by g (element e): the same algorithm, lanes and steps, each
// with the same primitive, count and mapped peers. Offsets and buffers are
// not compared: the simulator does not read them.
bool planIsImage(const SimPlan& image, const SimPlan& original, const Symmetry& sym, int e);

// Each link's orbit under a symmetry, learned as flows ask: the canonical
// link that stands for the orbit, and how many images of one flow crossing
// some link of the orbit cross the canonical one (its stabilizer's size).
class LinkOrbits {
 public:
  LinkOrbits(const Symmetry& sym, const Fabric& fabric, size_t links);
  const Symmetry& symmetry() const { return sym_; }
  int canonical(int link);
  double weight(int link);  // of canonical(link)'s orbit
  // Every link's canonical one (the orbits not yet asked for computed now).
  const std::vector<int>& all();

 private:
  void learn(int link);
  const Symmetry sym_;
  const Fabric& fabric_;
  std::vector<int> canon_;
  std::vector<double> weight_;
  std::vector<int> seen_;
  int seenMark_ = 0;
};

}  // namespace gyre::sim
