// Rank, size and rendezvous address from a launcher's environment, for
// gyreCommInitFromEnv. Sources, first match wins:
//   gyre      GYRE_RANK, GYRE_WORLD_SIZE, GYRE_COMM_ID [, GYRE_SECRET, GYRE_LOCAL_RANK]
//   torchrun  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT [, LOCAL_RANK, LOCAL_WORLD_SIZE]
//   Open MPI  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST, SLURM_JOB_ID
// The root address: GYRE_COMM_ID if set, else MASTER_ADDR:MASTER_PORT, else
// (Open MPI on one host) loopback, (Slurm) the first node of the allocation,
// with a port derived from the job id. Rank 0 hosts the root unless
// GYRE_ROOT_EXTERNAL=1 says a launcher (gyrerun) already does.
// The secret: GYRE_SECRET if set; else, under Open MPI, from the random key
// mpirun gives each job (OMPI_MCA_orte_precondition_transports, private to
// the job's processes); else derived from the job's public facts.
#pragma once

#include <string>

#include "bootstrap/unique_id.h"

namespace gyre::bootstrap {

struct LaunchEnv {
  std::string source;  // "gyre", "torchrun", "openmpi", "slurm"
  int rank = -1;
  int nranks = -1;
  int localRank = -1;
  int localSize = -1;
  std::string rootAddress;  // host:port
  bool rootExternal = false;
  Secret secret{};
  // Where the secret came from: "GYRE_SECRET", "the Open MPI job's key", or
  // "derived from public facts" (a stranger could compute it).
  std::string secretSource;
  bool secretDerived = false;
};

// Throws Error(gyreInvalidUsage) naming what is missing or malformed.
LaunchEnv detectLaunchEnv();

// "node[01-03,7],gpu5" -> "node01" (the first host of a Slurm node list).
std::string firstSlurmHost(const std::string& nodelist);

}  // namespace gyre::bootstrap
