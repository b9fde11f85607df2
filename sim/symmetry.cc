#include "sim/symmetry.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace gyre::sim {

namespace {
bool powerOfTwo(int x) { return x > 0 && (x & (x - 1)) == 0; }
}  // namespace

Symmetry::Symmetry(int nranks, int ranksPerHost, Kind inner, int step, int block, Kind outer)
    : n_(nranks), R_(ranksPerHost), step_(step), block_(block), inner_(inner), outer_(outer) {
  innerOrder_ = inner == Kind::None ? 1 : R_ / step_;
  outerOrder_ = outer == Kind::None ? 1 : n_ / block_;
}

int Symmetry::apply(int e, int r) const {
  const int i = e % innerOrder_, j = e / innerOrder_;
  int blk = r / block_;
  const int pos = r % block_;
  const int host = pos / R_;
  int l = pos % R_;
  if (inner_ == Kind::Rotate) l = (l + i * step_) % R_;
  else if (inner_ == Kind::Xor) l ^= i * step_;
  if (outer_ == Kind::Rotate) blk = (blk + j) % outerOrder_;
  else if (outer_ == Kind::Xor) blk ^= j;
  return blk * block_ + host * R_ + l;
}

int Symmetry::inverse(int e) const {
  int i = e % innerOrder_, j = e / innerOrder_;
  if (inner_ == Kind::Rotate) i = (innerOrder_ - i) % innerOrder_;
  if (outer_ == Kind::Rotate) j = (outerOrder_ - j) % outerOrder_;
  return j * innerOrder_ + i;
}

// Both kinds keep a local index's remainder by the step and a block's
// position, and reach every other value: the representative has local index
// below the step (inner) in block 0 (outer), and the element's parts are
// the quotients (l + k step for a rotation, l ^ k step for an XOR alike).
int Symmetry::representative(int r) const {
  int blk = r / block_;
  const int pos = r % block_;
  int l = pos % R_;
  if (inner_ != Kind::None) l %= step_;
  if (outer_ != Kind::None) blk = 0;
  return blk * block_ + (pos / R_) * R_ + l;
}

int Symmetry::elementOf(int r) const {
  const int i = inner_ == Kind::None ? 0 : (r % R_) / step_;
  const int j = outer_ == Kind::None ? 0 : r / block_;
  return j * innerOrder_ + i;
}

std::string Symmetry::describe() const {
  auto kind = [](Kind k) { return k == Kind::Rotate ? "rotated" : "XORed"; };
  std::string how;
  if (inner_ != Kind::None)
    how = "local indices " + std::string(kind(inner_)) + " in steps of " + std::to_string(step_);
  if (outer_ != Kind::None) {
    if (!how.empty()) how += ", ";
    how += "blocks of " + std::to_string(block_) + " " + kind(outer_);
  }
  return std::to_string(n_) + " ranks as " + std::to_string(orbits()) + " orbits of " + std::to_string(order()) +
         " (" + how + ")";
}

std::vector<Symmetry> clusterSymmetries(const ClusterSpec& spec) {
  const int n = spec.nranks(), R = spec.ranksPerHost;
  const int leaves = (spec.hosts + spec.hostsPerLeaf - 1) / spec.hostsPerLeaf;
  // A partly filled last leaf has a narrower uplink: no leaf maps onto it.
  if (leaves > 1 && spec.hosts % spec.hostsPerLeaf != 0) return {};
  // Blocks: the leaves' ranks, or the hosts' when one switch joins them.
  const int block = leaves > 1 ? spec.hostsPerLeaf * R : R;
  const int blocks = n / block;
  // A NIC serves ranksPerNic consecutive local indices: moves in steps of
  // that keep its group whole (any move does when one NIC serves all).
  const int ranksPerNic = R / spec.nicsPerHost;
  const int step = ranksPerNic == R ? 1 : ranksPerNic;
  using K = Symmetry::Kind;
  std::vector<K> inner{K::None}, outer{K::None};
  // Where ranks share cores (rank on core l % C), a move inside hosts must
  // take the ranks of one core to the ranks of one core: a rotation does
  // when C divides R, an XOR when C is a power of two.
  const int C = spec.coresPerHost > 0 ? std::min(spec.coresPerHost, R) : R;
  if (R / step > 1 && R % C == 0) {
    inner.push_back(K::Rotate);
    if (powerOfTwo(R) && powerOfTwo(step) && powerOfTwo(C)) inner.push_back(K::Xor);
  }
  if (blocks > 1) {
    outer.push_back(K::Rotate);
    if (powerOfTwo(blocks)) outer.push_back(K::Xor);
  }
  std::vector<Symmetry> out;
  for (K o : outer)
    for (K i : inner)
      if (i != K::None || o != K::None) out.emplace_back(n, R, i, step, block, o);
  std::stable_sort(out.begin(), out.end(), [](const Symmetry& a, const Symmetry& b) { return a.order() > b.order(); });
  return out;
}

bool planIsImage(const SimPlan& image, const SimPlan& original, const Symmetry& sym, int e) {
  if (std::strcmp(image.algorithm, original.algorithm) != 0) return false;
  if (image.steps.size() != original.steps.size() || image.lanes.size() != original.lanes.size()) return false;
  if (image.peersWriteOutput != original.peersWriteOutput) return false;
  for (size_t i = 0; i < image.lanes.size(); ++i)
    if (image.lanes[i].begin != original.lanes[i].begin || image.lanes[i].end != original.lanes[i].end) return false;
  auto map = [&](int p) { return p < 0 ? p : sym.apply(e, p); };
  for (size_t i = 0; i < image.steps.size(); ++i) {
    const SimStep& a = image.steps[i];
    const SimStep& b = original.steps[i];
    if (a.prim != b.prim || a.count != b.count || a.toAll != b.toAll) return false;
    if (a.sendPeer != map(b.sendPeer) || a.recvPeer != map(b.recvPeer)) return false;
  }
  std::vector<int> mine = image.peers, theirs;
  for (int p : original.peers) theirs.push_back(map(p));
  std::sort(mine.begin(), mine.end());
  std::sort(theirs.begin(), theirs.end());
  return mine == theirs;
}

LinkOrbits::LinkOrbits(const Symmetry& sym, const Fabric& fabric, size_t links)
    : sym_(sym), fabric_(fabric), canon_(links, -1), weight_(links, 0), seen_(links, 0) {}

// The orbit of `link`: its images under every element, the first asked for
// standing for all. Each image is the link of the same kind that the image
// of a rank it belongs to has (Fabric::sameLinkOf).
void LinkOrbits::learn(int link) {
  const int owner = fabric_.linkOwner(link);
  if (owner < 0) throwError(gyreInternalError, "simulator: a link with no rank to map it by");
  ++seenMark_;
  int distinct = 0;
  std::vector<int> images;
  for (int e = 0; e < sym_.order(); ++e) {
    const int m = fabric_.sameLinkOf(link, sym_.apply(e, owner));
    if (seen_[static_cast<size_t>(m)] == seenMark_) continue;
    seen_[static_cast<size_t>(m)] = seenMark_;
    ++distinct;
    images.push_back(m);
  }
  const double stabilizer = double(sym_.order()) / distinct;
  for (int m : images) {
    canon_[static_cast<size_t>(m)] = link;
    weight_[static_cast<size_t>(m)] = stabilizer;
  }
}

int LinkOrbits::canonical(int link) {
  if (canon_[static_cast<size_t>(link)] < 0) learn(link);
  return canon_[static_cast<size_t>(link)];
}

double LinkOrbits::weight(int link) {
  if (canon_[static_cast<size_t>(link)] < 0) learn(link);
  return weight_[static_cast<size_t>(link)];
}

const std::vector<int>& LinkOrbits::all() {
  for (size_t l = 0; l < canon_.size(); ++l)
    if (canon_[l] < 0) learn(static_cast<int>(l));
  return canon_;
}

}  // namespace gyre::sim
