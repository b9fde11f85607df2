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
// A communicator going away leaves any group it was part of.
void forget(const Communicator& comm);

}  // namespace group
}  // namespace gyre::core
