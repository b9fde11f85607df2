#include "harness/expert_parallel.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "harness/data_parallel.h"

namespace gyre::harness {

namespace {

// gyre's routing of one forward: destroyed with the activations that hold it.
struct GyreRoute : ExpertExchange::Route {
  gyreMoeRouting_t routing = nullptr;
  size_t rows = 0;  // what this rank's experts received
  ~GyreRoute() override {
    if (routing) gyreMoeRoutingDestroy(routing);
  }
};

GyreRoute& gyreRoute(ExpertExchange::Route& route) {
  auto* r = dynamic_cast<GyreRoute*>(&route);
  if (r == nullptr) throw std::invalid_argument("GyreExpertExchange: a route it did not make");
  return *r;
}

// Adds the seconds from construction to destruction to *sum (if any).
class Stopwatch {
 public:
  explicit Stopwatch(double* sum) : sum_(sum), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    if (sum_)
      *sum_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double* sum_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

GyreExpertExchange::GyreExpertExchange(gyreComm_t comm, int experts, int topK, double* seconds)
    : comm_(comm), experts_(experts), topK_(topK), seconds_(seconds) {
  checkGyre(gyreCommUserRank(comm, &rank_), "gyreCommUserRank", comm);
  checkGyre(gyreCommCount(comm, &size_), "gyreCommCount", comm);
  if (experts < 1 || experts % size_ != 0) {
    throw std::invalid_argument("expert parallelism over " + std::to_string(size_) +
                                " ranks needs an expert count it divides; got " +
                                std::to_string(experts));
  }
}

std::shared_ptr<ExpertExchange::Route> GyreExpertExchange::dispatch(const MoeRouting& routing,
                                                                    const float* x, int C,
                                                                    std::vector<float>& rows,
                                                                    std::vector<int>& counts) {
  if (routing.E != experts_ || routing.k != topK_) {
    throw std::invalid_argument("GyreExpertExchange: a routing of top-" +
                                std::to_string(routing.k) + " of " + std::to_string(routing.E) +
                                " experts for an exchange of top-" + std::to_string(topK_) +
                                " of " + std::to_string(experts_));
  }
  Stopwatch watch(seconds_);
  // The layer has applied the capacity already: its dropped slots go
  // nowhere, so gyre's routing needs no capacity of its own.
  std::vector<int32_t> choices(routing.choice.size());
  for (size_t slot = 0; slot < choices.size(); ++slot)
    choices[slot] = routing.row[slot] < 0 ? -1 : routing.choice[slot];
  auto route = std::make_shared<GyreRoute>();
  checkGyre(gyreMoeRoutingCreate(&route->routing, choices.data(), routing.N, routing.k, experts_,
                                 nullptr, 0, comm_),
            "gyreMoeRoutingCreate", comm_);
  const size_t most = static_cast<size_t>(size_) * routing.N * routing.k;
  rows.assign(most * C, 0.0f);
  checkGyre(gyreMoeDispatch(x, rows.data(), most, C, gyreFloat32, 0, route->routing, comm_, nullptr),
            "gyreMoeDispatch of the tokens to their experts", comm_);
  const int local = experts_ / size_;
  std::vector<size_t> perSource(static_cast<size_t>(local) * size_);
  checkGyre(gyreMoeRecvCounts(route->routing, perSource.data(), nullptr, &route->rows),
            "gyreMoeRecvCounts", comm_);
  rows.resize(route->rows * C);
  counts.assign(local, 0);
  for (int l = 0; l < local; ++l)
    for (int q = 0; q < size_; ++q) counts[l] += static_cast<int>(perSource[l * size_ + q]);
  return route;
}

void GyreExpertExchange::combine(Route& route, const float* rows, float* slots, int C) {
  Stopwatch watch(seconds_);
  GyreRoute& r = gyreRoute(route);
  checkGyre(gyreMoeCombine(rows, r.rows, slots, nullptr, C, gyreFloat32, r.routing, comm_, nullptr),
            "gyreMoeCombine of the experts' rows to their tokens", comm_);
}

void GyreExpertExchange::dispatchSlots(Route& route, const float* slots, float* rows, int C) {
  Stopwatch watch(seconds_);
  GyreRoute& r = gyreRoute(route);
  checkGyre(gyreMoeDispatch(slots, rows, r.rows, C, gyreFloat32, GYRE_MOE_PER_SLOT, r.routing,
                            comm_, nullptr),
            "gyreMoeDispatch of the slots' gradients to their experts", comm_);
}

}  // namespace gyre::harness
