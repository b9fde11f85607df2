// Every collective other than AllReduce (which allreduce_test covers), over
// real processes: each operation x each of its algorithms (forced through
// GYRE_ALGO) x shm and tcp x rank counts x dtypes (x ops where it reduces) x
// counts x in/out-of-place. Inputs are exact, every element is checked, and
// what must stay untouched (non-roots' buffers, bytes past the end, gaps
// between AllToAllv blocks, out-of-place inputs) is checked too.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "collectives/planner.h"
#include "tests/support/multiprocess.h"

namespace gyre::test {
namespace {

constexpr size_t kSmallCounts[] = {0, 1, 7, 1000};
constexpr size_t kLargeCount = 131075;  // several pieces and FIFO wraps, not a multiple of anything
constexpr unsigned char kFill = 0xA5;
constexpr size_t kGuard = 64;

struct Case {
  const char* transport;
  int nranks;
  const char* op;    // GYRE_ALGO's name for the operation
  const char* algo;  // nullptr: automatic
  // Buffers from gyreMemAllocHost, which local peers map (single-copy reads
  // without the kernel), freshly allocated for every operation, and
  // GYRE_MAPPED_BUFFERS=1 (AllToAllv's blockwise then reads its larger blocks).
  bool mapped = false;
  // Ranks dealt over this many "hosts" by rank % hosts (GYRE_HOSTID), so
  // the topology's ring (each host's ranks in a row) differs from rank
  // order: 0 for one host.
  int hosts = 0;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.op << " " << (c.algo ? c.algo : "auto") << ", " << c.transport << ", " << c.nranks << " ranks"
      << (c.mapped ? ", gyreMemAllocHost buffers" : "")
      << (c.hosts ? ", " + std::to_string(c.hosts) + " hosts dealt by rank" : "");
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(c.op) + "_" + (c.algo ? c.algo : "auto") + "_" + c.transport + "_" + std::to_string(c.nranks) +
         (c.mapped ? "_memalloc" : "") + (c.hosts ? "_" + std::to_string(c.hosts) + "hosts" : "");
}

// One test buffer: a vector, or memory from gyreMemAllocHost. Reallocating the
// latter for every operation makes the peers' cached mappings go stale (the
// same descriptor numbers come back for new allocations), which they must
// notice.
class TestBuffer {
 public:
  explicit TestBuffer(bool mapped) : mapped_(mapped) {}
  ~TestBuffer() { release(); }
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;
  void assign(size_t bytes, unsigned char fill) {
    if (!mapped_) {
      vec_.assign(bytes, fill);
      data_ = vec_.data();
      return;
    }
    release();
    void* p = nullptr;
    if (gyreMemAllocHost(&p, bytes) != gyreSuccess) throw std::runtime_error(gyreGetLastError(nullptr));
    data_ = static_cast<unsigned char*>(p);
    std::memset(data_, fill, bytes);
  }
  unsigned char* data() { return data_; }
  unsigned char* begin() { return data_; }

 private:
  void release() {
    if (mapped_ && data_) gyreMemFree(data_);
    data_ = nullptr;
  }
  bool mapped_;
  std::vector<unsigned char> vec_;
  unsigned char* data_ = nullptr;
};

// Buffers filled with kFill, so that what an operation must not write shows.
struct Buffers {
  explicit Buffers(bool mapped) : send(mapped), recv(mapped) {}
  TestBuffer send, recv;
  std::vector<unsigned char> saved;
  void reset(size_t sendBytes, size_t recvBytes) {
    send.assign(sendBytes + kGuard, kFill);
    recv.assign(recvBytes + kGuard, kFill);
  }
};

bool untouched(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != kFill) return false;
  return true;
}

// One rank's part of one operation at one (dtype, op, count, in-place).
class OpChecker {
 public:
  OpChecker(gyreComm_t comm, int rank, int nranks, Checker& check, bool mapped)
      : comm_(comm), me_(rank), n_(nranks), check_(check), b_(mapped) {}

  void run(const std::string& op, gyreDataType_t t, gyreRedOp_t red, size_t count, bool inPlace, int root) {
    what_ = op + " " + dtypeLabel(t) + (op == "reduce" || op == "reducescatter" ? std::string(" ") + opLabel(red) : "") +
            " count " + std::to_string(count) + (inPlace ? " in-place" : " out-of-place") +
            (root >= 0 ? " root " + std::to_string(root) : "");
    esz_ = dtypeBytes(t);
    if (op == "broadcast") broadcast(t, count, inPlace, root);
    else if (op == "reduce") reduce(t, red, count, inPlace, root);
    else if (op == "allgather") allGather(t, count, inPlace);
    else if (op == "reducescatter") reduceScatter(t, red, count, inPlace);
    else if (op == "alltoall") allToAll(t, count, inPlace);
    else if (op == "alltoallv") allToAllv(t, count);
    else if (op == "gather") gather(t, count, inPlace, root);
    else if (op == "scatter") scatter(t, count, inPlace, root);
    else if (op == "barrier") check_.expectOk(gyreBarrier(comm_, nullptr), "barrier");
  }

 private:
  size_t bytes(size_t count) const { return count * esz_; }
  unsigned char* at(TestBuffer& v, size_t elems) { return v.data() + bytes(elems); }

  bool call(gyreResult_t r) { return check_.expectOk(r, what_); }
  void expectPattern(const void* p, size_t count, gyreDataType_t t, uint64_t seed, const std::string& where) {
    std::string bad;
    const size_t wrong = countPatternWrong(p, count, t, seed, &bad);
    check_.expect(wrong == 0, what_ + ", " + where + ": " + std::to_string(wrong) + " wrong; " + bad);
  }
  void expectReduced(const void* p, size_t count, gyreDataType_t t, gyreRedOp_t red, size_t firstIndex) {
    std::string bad;
    const size_t wrong = countWrong(p, count, t, red, n_, &bad, firstIndex);
    check_.expect(wrong == 0, what_ + ": " + std::to_string(wrong) + " wrong; " + bad);
  }
  void expectGuard(const unsigned char* end) { check_.expect(untouched(end, kGuard), what_ + ": wrote past the end"); }
  void saveInput(size_t sendBytes) { b_.saved.assign(b_.send.begin(), b_.send.begin() + sendBytes); }
  void expectInputKept(size_t sendBytes) {
    check_.expect(sendBytes == 0 || std::memcmp(b_.saved.data(), b_.send.data(), sendBytes) == 0, what_ + ": modified sendbuff");
  }

  void broadcast(gyreDataType_t t, size_t count, bool inPlace, int root) {
    b_.reset(bytes(count), bytes(count));
    void* out = inPlace ? b_.send.data() : b_.recv.data();
    if (me_ == root) fillPattern(b_.send.data(), count, t, root);
    saveInput(bytes(count));
    if (!call(gyreBroadcast(b_.send.data(), out, count, t, root, comm_, nullptr))) return;
    expectPattern(out, count, t, root, "output");
    expectGuard(static_cast<unsigned char*>(out) + bytes(count));
    if (!inPlace) expectInputKept(bytes(count));
  }

  void reduce(gyreDataType_t t, gyreRedOp_t red, size_t count, bool inPlace, int root) {
    b_.reset(bytes(count), bytes(count));
    fillInput(b_.send.data(), count, t, red, me_);
    saveInput(bytes(count));
    void* out = inPlace ? b_.send.data() : b_.recv.data();
    if (!call(gyreReduce(b_.send.data(), out, count, t, red, root, comm_, nullptr))) return;
    if (me_ == root) expectReduced(out, count, t, red, 0);
    else if (!inPlace) check_.expect(untouched(b_.recv.data(), bytes(count)), what_ + ": a non-root's recvbuff was written");
    if (!inPlace) expectInputKept(bytes(count));
    expectGuard(static_cast<unsigned char*>(out) + bytes(count));
  }

  void allGather(gyreDataType_t t, size_t count, bool inPlace) {
    const size_t all = count * n_;
    b_.reset(bytes(count), bytes(all));
    void* in = inPlace ? at(b_.recv, count * me_) : b_.send.data();
    fillPattern(in, count, t, me_);
    if (!inPlace) saveInput(bytes(count));
    if (!call(gyreAllGather(in, b_.recv.data(), count, t, comm_, nullptr))) return;
    for (int q = 0; q < n_; ++q) expectPattern(at(b_.recv, count * q), count, t, q, "block " + std::to_string(q));
    expectGuard(at(b_.recv, all));
    if (!inPlace) expectInputKept(bytes(count));
  }

  void reduceScatter(gyreDataType_t t, gyreRedOp_t red, size_t count, bool inPlace) {
    const size_t all = count * n_;
    b_.reset(bytes(all), bytes(count));
    fillInput(b_.send.data(), all, t, red, me_);
    saveInput(bytes(all));
    void* out = inPlace ? at(b_.send, count * me_) : b_.recv.data();
    if (!call(gyreReduceScatter(b_.send.data(), out, count, t, red, comm_, nullptr))) return;
    expectReduced(out, count, t, red, count * me_);
    if (!inPlace) {
      expectInputKept(bytes(all));
      expectGuard(at(b_.recv, count));
    }
    expectGuard(at(b_.send, all));
  }

  // Block p of rank r's input goes to rank p: pattern seed r * n + p.
  void allToAll(gyreDataType_t t, size_t count, bool inPlace) {
    const size_t all = count * n_;
    b_.reset(bytes(all), bytes(all));
    for (int p = 0; p < n_; ++p) fillPattern(at(b_.send, count * p), count, t, uint64_t(me_) * n_ + p);
    saveInput(bytes(all));
    void* out = inPlace ? b_.send.data() : b_.recv.data();
    if (!call(gyreAllToAll(b_.send.data(), out, count, t, comm_, nullptr))) return;
    for (int q = 0; q < n_; ++q)
      expectPattern(static_cast<unsigned char*>(out) + bytes(count * q), count, t, uint64_t(q) * n_ + me_,
                    "block from rank " + std::to_string(q));
    expectGuard(static_cast<unsigned char*>(out) + bytes(all));
    if (!inPlace) expectInputKept(bytes(all));
  }

  // Uneven counts, zeros included (rank s sends rank d vcount(s, d)), blocks
  // in reverse order with a gap before each, which must stay untouched.
  static size_t vcount(size_t base, int s, int d) { return ((s * 3 + d * 5) % 4 == 0) ? 0 : base * size_t(1 + (s + 2 * d) % 3); }
  void allToAllv(gyreDataType_t t, size_t base) {
    std::vector<size_t> sc(n_), sd(n_), rc(n_), rd(n_);
    size_t sendEnd = 0, recvEnd = 0;
    for (int k = n_ - 1; k >= 0; --k) {
      sc[k] = vcount(base, me_, k);
      sd[k] = sendEnd + 3;
      sendEnd = sd[k] + sc[k];
      rc[k] = vcount(base, k, me_);
      rd[k] = recvEnd + 5;
      recvEnd = rd[k] + rc[k];
    }
    b_.reset(bytes(sendEnd), bytes(recvEnd));
    for (int p = 0; p < n_; ++p) fillPattern(at(b_.send, sd[p]), sc[p], t, uint64_t(me_) * n_ + p);
    saveInput(bytes(sendEnd));
    if (!call(gyreAllToAllv(b_.send.data(), sc.data(), sd.data(), b_.recv.data(), rc.data(), rd.data(), t, comm_,
                            nullptr)))
      return;
    for (int q = 0; q < n_; ++q) {
      expectPattern(at(b_.recv, rd[q]), rc[q], t, uint64_t(q) * n_ + me_, "block from rank " + std::to_string(q));
      check_.expect(untouched(at(b_.recv, rd[q] - 5), bytes(5)), what_ + ": wrote into the gap before block " +
                                                                     std::to_string(q));
    }
    expectGuard(at(b_.recv, recvEnd));
    expectInputKept(bytes(sendEnd));
  }

  void gather(gyreDataType_t t, size_t count, bool inPlace, int root) {
    const size_t all = count * n_;
    b_.reset(bytes(count), bytes(all));
    void* in = inPlace && me_ == root ? at(b_.recv, count * root) : b_.send.data();
    fillPattern(in, count, t, me_);
    if (in == b_.send.data()) saveInput(bytes(count));
    if (!call(gyreGather(in, b_.recv.data(), count, t, root, comm_, nullptr))) return;
    if (me_ == root) {
      for (int q = 0; q < n_; ++q) expectPattern(at(b_.recv, count * q), count, t, q, "block " + std::to_string(q));
    } else {
      check_.expect(untouched(b_.recv.data(), bytes(all)), what_ + ": a non-root's recvbuff was written");
    }
    expectGuard(at(b_.recv, all));
    if (in == b_.send.data()) expectInputKept(bytes(count));
  }

  void scatter(gyreDataType_t t, size_t count, bool inPlace, int root) {
    const size_t all = count * n_;
    b_.reset(bytes(all), bytes(count));
    if (me_ == root)
      for (int p = 0; p < n_; ++p) fillPattern(at(b_.send, count * p), count, t, uint64_t(p) + 7);
    saveInput(bytes(all));
    void* out = inPlace && me_ == root ? at(b_.send, count * root) : b_.recv.data();
    if (!call(gyreScatter(b_.send.data(), out, count, t, root, comm_, nullptr))) return;
    expectPattern(out, count, t, uint64_t(me_) + 7, "output");
    if (out == b_.recv.data()) expectGuard(at(b_.recv, count));
    if (!(inPlace && me_ == root)) expectInputKept(bytes(all));
  }

  gyreComm_t comm_;
  int me_, n_;
  Checker& check_;
  Buffers b_;
  std::string what_;
  size_t esz_ = 1;
};

bool reduces(const std::string& op) { return op == "reduce" || op == "reducescatter"; }
bool rooted(const std::string& op) { return op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter"; }
bool hasInPlace(const std::string& op) { return op != "alltoallv" && op != "barrier"; }

int runCase(int rank, int nranks, const gyreUniqueId& id, const Case& c) {
  if (c.algo) setenv("GYRE_ALGO", (std::string(c.op) + ":" + c.algo).c_str(), 1);
  if (c.hosts) setenv("GYRE_HOSTID", ("host" + std::to_string(rank % c.hosts)).c_str(), 1);
  if (c.mapped) setenv("GYRE_MAPPED_BUFFERS", "1", 1);
  Checker check(rank);
  gyreComm_t comm = initRank(rank, nranks, id, c.transport);
  if (!comm) return 1;
  OpChecker op(comm, rank, nranks, check, c.mapped);
  const std::string name = c.op;
  // Roots: the first, the last and (with 3 or more ranks) one in between.
  std::vector<int> roots = {-1};
  if (rooted(name)) roots = nranks > 2 ? std::vector<int>{0, nranks / 2, nranks - 1} : std::vector<int>{nranks - 1};
  for (int t = 0; t < gyreNumTypes; ++t) {
    const auto dtype = static_cast<gyreDataType_t>(t);
    for (int o = 0; o < (reduces(name) ? int(gyreNumOps) : 1); ++o)
      for (size_t count : kSmallCounts)
        for (int root : roots)
          for (int inPlace = 0; inPlace < (hasInPlace(name) ? 2 : 1); ++inPlace)
            op.run(name, dtype, static_cast<gyreRedOp_t>(o), count, inPlace, root);
    if (check.failures()) break;
  }
  // Large vectors, for the pipelining: a narrow, a wide and a 16-bit float type.
  for (gyreDataType_t dtype : {gyreInt8, gyreBfloat16, gyreFloat64})
    for (int inPlace = 0; inPlace < (hasInPlace(name) ? 2 : 1); ++inPlace)
      op.run(name, dtype, gyreSum, kLargeCount, inPlace, roots.back());
  check.expectOk(gyreCommDestroy(comm), "destroy");
  return check.failures() ? 1 : 0;
}

class Collective : public testing::TestWithParam<Case> {};

TEST_P(Collective, ExactResultsForEveryTypeCountAndPlacement) {
  const Case c = GetParam();
  RunOptions options;
  options.timeoutSec = 300;
  RunOutcome out = runRanks(c.nranks, [&](int r, int n, const gyreUniqueId& id) { return runCase(r, n, id, c); },
                            options);
  EXPECT_TRUE(out.allSucceeded()) << out.describe();
}

const char* const kOps[] = {"broadcast", "reduce",  "allgather", "reducescatter", "alltoall",
                            "alltoallv", "gather", "scatter",   "barrier"};

// Every registered algorithm of every operation; single-copy ones need a
// transport that reads peers' memory (shm, ucx).
// AllToAllv's blockwise reads some blocks where it can (shm; with mapped
// buffers from a few KiB up) and is pairwise over tcp.
std::vector<Case> forcedCases() {
  std::vector<Case> cases;
  for (const char* op : kOps)
    for (const collectives::Algorithm& a : collectives::algorithms()) {
      if (std::string(collectives::opKindName(a.op)) != op) continue;
      const bool direct = std::string(a.name).starts_with("direct");  // direct, direct_multi
      const bool reads = direct || std::string(a.name) == "blockwise";
      cases.push_back({"shm", 2, op, a.name});
      cases.push_back({"shm", 3, op, a.name});
      cases.push_back({"shm", 4, op, a.name});  // power of two: every halving/doubling step
      cases.push_back({"shm", 5, op, a.name});
      if (!direct) cases.push_back({"tcp", 3, op, a.name});
#ifdef GYRE_HAVE_UCX
      // Reads through UCX's rkeys (only when asked: the tuner prices reads
      // as the kernel's copies within a host).
      if (direct) cases.push_back({"ucx", 3, op, a.name});
#endif
      if (reads) {
        cases.push_back({"shm", 2, op, a.name, true});
        cases.push_back({"shm", 4, op, a.name, true});
      }
    }
  return cases;
}

// The automatic choice at every rank count, shm and tcp, the socket plugin
// (net) and ucx where built; 8 ranks (four per core here) for the oversubscribed case.
std::vector<Case> autoCases() {
  std::vector<Case> cases;
  for (const char* op : kOps) {
    for (int n : {1, 2, 4, 8}) cases.push_back({"shm", n, op, nullptr});
    for (int n : {1, 2, 4}) cases.push_back({"tcp", n, op, nullptr});
    for (int n : {2, 3}) cases.push_back({"net", n, op, nullptr});
#ifdef GYRE_HAVE_UCX
    for (int n : {2, 3}) cases.push_back({"ucx", n, op, nullptr});
#endif
  }
  return cases;
}

// Hosts dealt by rank: the algorithms that follow the topology's ring
// (rings and chains) see it differ from rank order, with shared memory
// within a host and TCP across.
std::vector<Case> hostCases() {
  std::vector<Case> cases;
  for (const char* op : {"allgather", "reducescatter", "broadcast", "reduce"})
    for (const collectives::Algorithm& a : collectives::algorithms()) {
      if (std::string(collectives::opKindName(a.op)) != op || std::string(a.name).starts_with("direct")) continue;
      cases.push_back({"auto", 4, op, a.name, false, 2});
      cases.push_back({"auto", 5, op, a.name, false, 2});
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Forced, Collective, testing::ValuesIn(forcedCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Hosts, Collective, testing::ValuesIn(hostCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Auto, Collective, testing::ValuesIn(autoCases()), caseName);

}  // namespace
}  // namespace gyre::test
