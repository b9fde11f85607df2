// Built where no solver was found (configure said "FlexSP MIP solver: no"):
// the planner uses its greedy plan and says so.
#include "flexsp/mip.h"

namespace gyre::flexsp {

std::string solverName() { return ""; }

MipResult solveMip(const MipInput&) {
  MipResult r;
  r.status = MipResult::Status::Absent;
  r.detail = "no MIP solver built in (install libglpk-dev and configure again)";
  return r;
}

}  // namespace gyre::flexsp
