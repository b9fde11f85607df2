// NCCL's environment variables as gyre's (nccl_env.cc).
#pragma once

// Maps NCCL_ variables onto their GYRE_ counterparts again (at load it runs
// by itself): ncclResetDebugInit, for a program that changed NCCL_DEBUG.
void remapNcclEnvironment();
