// -T: a bound on each row (one size of one type and op, both placements,
// warmup, timed iterations, check and the cross-rank sums). A row past it
// ends the rank with a message naming the row and exit status 3, instead
// of a hang; a rank stuck waiting on a dead peer ends the same way.
#pragma once

#include <string>

namespace gyre::bench {

constexpr int kTimeoutExit = 3;

// Starts the clock for a row; `what` names it in the message. seconds 0: off.
void armRowTimeout(int seconds, int rank, const std::string& what);
void disarmRowTimeout();

}  // namespace gyre::bench
