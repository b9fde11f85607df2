// gyreGroupStart/End: calls made in between, on this thread, are collected
// per communicator and run together at the outermost end.
#pragma once

#include "core/operation.h"

namespace gyre::core {

class Communicator;

namespace group {

bool active();
void start();
// Keeps op for the end of the group.
void add(Communicator& comm, Operation op);
// Runs what was collected (at the outermost end); throws the first failure.
void end();
// Ends the group as end() would, but runs nothing: returns the cost model's
// microseconds for what was collected (each communicator's calls one after
// another, the communicators side by side: the slowest's), and completes
// any nonblocking call in it as not run. An inner end: nothing yet, 0.
double simulateEnd();
// A communicator going away leaves any group it was part of.
void forget(const Communicator& comm);

}  // namespace group
}  // namespace gyre::core
