#include "bootstrap/launch_env.h"

#include <cstdlib>

#include "base/error.h"
#include "base/hash.h"
#include "base/parse.h"

namespace gyre::bootstrap {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int envInt(const char* name, int lo, int hi) {
  return static_cast<int>(parseInt(env(name), name, lo, hi));
}

// Below Linux's ephemeral range (32768 and up by default), so an outgoing
// connection of some other process cannot be holding it.
uint16_t portFromJobId(const std::string& job) {
  return static_cast<uint16_t>(12000 + fnv1a(job) % 20000);
}

}  // namespace

std::string firstSlurmHost(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  size_t depth = 0, end = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[')
      ++depth;
    else if (nodelist[end] == ']')
      --depth;
    else if (nodelist[end] == ',' && depth == 0)
      break;
  }
  std::string first = nodelist.substr(0, end);
  size_t open = first.find('[');
  if (open == std::string::npos) return first;
  std::string prefix = first.substr(0, open);
  std::string range = first.substr(open + 1);
  size_t stop = range.find_first_of(",-]");
  return prefix + range.substr(0, stop);
}

LaunchEnv detectLaunchEnv() {
  LaunchEnv e;
  std::string jobIdentity;
  if (env("GYRE_RANK") || env("GYRE_WORLD_SIZE")) {
    e.source = "gyre";
    if (!env("GYRE_RANK") || !env("GYRE_WORLD_SIZE"))
      throwError(gyreInvalidUsage, "GYRE_RANK and GYRE_WORLD_SIZE must be set together");
    e.nranks = envInt("GYRE_WORLD_SIZE", 1, GYRE_MAX_RANKS);
    e.rank = envInt("GYRE_RANK", 0, e.nranks - 1);
    if (env("GYRE_LOCAL_RANK")) e.localRank = envInt("GYRE_LOCAL_RANK", 0, GYRE_MAX_RANKS);
    if (env("GYRE_LOCAL_SIZE")) e.localSize = envInt("GYRE_LOCAL_SIZE", 1, GYRE_MAX_RANKS);
    if (!env("GYRE_COMM_ID"))
      throwError(gyreInvalidUsage,
                 "GYRE_RANK is set but GYRE_COMM_ID (host:port of the rendezvous root) is not");
  } else if (env("RANK") && env("WORLD_SIZE") && env("MASTER_ADDR") && env("MASTER_PORT")) {
    e.source = "torchrun";
    e.nranks = envInt("WORLD_SIZE", 1, GYRE_MAX_RANKS);
    e.rank = envInt("RANK", 0, e.nranks - 1);
    if (env("LOCAL_RANK")) e.localRank = envInt("LOCAL_RANK", 0, GYRE_MAX_RANKS);
    if (env("LOCAL_WORLD_SIZE")) e.localSize = envInt("LOCAL_WORLD_SIZE", 1, GYRE_MAX_RANKS);
    if (const char* run = env("TORCHELASTIC_RUN_ID")) jobIdentity = run;
  } else if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) {
    e.source = "openmpi";
    e.nranks = envInt("OMPI_COMM_WORLD_SIZE", 1, GYRE_MAX_RANKS);
    e.rank = envInt("OMPI_COMM_WORLD_RANK", 0, e.nranks - 1);
    if (env("OMPI_COMM_WORLD_LOCAL_RANK"))
      e.localRank = envInt("OMPI_COMM_WORLD_LOCAL_RANK", 0, GYRE_MAX_RANKS);
    if (env("OMPI_COMM_WORLD_LOCAL_SIZE"))
      e.localSize = envInt("OMPI_COMM_WORLD_LOCAL_SIZE", 1, GYRE_MAX_RANKS);
    const char* job = env("OMPI_MCA_ess_base_jobid");
    if (!job) job = env("PMIX_NAMESPACE");
    jobIdentity = job ? job : "";
    if (!env("GYRE_COMM_ID") && !env("MASTER_ADDR")) {
      if (e.localSize != e.nranks || jobIdentity.empty())
        throwError(
            gyreInvalidUsage,
            "under Open MPI across several hosts, set GYRE_COMM_ID=host:port (or MASTER_ADDR "
            "and MASTER_PORT) to the address where rank 0 should listen");
      e.rootAddress = "127.0.0.1:" + std::to_string(portFromJobId(jobIdentity));
    }
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    e.source = "slurm";
    e.nranks = envInt("SLURM_NTASKS", 1, GYRE_MAX_RANKS);
    e.rank = envInt("SLURM_PROCID", 0, e.nranks - 1);
    if (env("SLURM_LOCALID")) e.localRank = envInt("SLURM_LOCALID", 0, GYRE_MAX_RANKS);
    jobIdentity = std::string(env("SLURM_JOB_ID") ? env("SLURM_JOB_ID") : "") + "." +
                  (env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : "");
    const char* nodes =
        env("SLURM_JOB_NODELIST") ? env("SLURM_JOB_NODELIST") : env("SLURM_NODELIST");
    if (!env("GYRE_COMM_ID") && !env("MASTER_ADDR")) {
      if (!nodes)
        throwError(gyreInvalidUsage,
                   "under Slurm without SLURM_JOB_NODELIST, set GYRE_COMM_ID=host:port");
      e.rootAddress = firstSlurmHost(nodes) + ":" + std::to_string(portFromJobId(jobIdentity));
    }
  } else {
    throwError(gyreInvalidUsage,
               "no launcher environment found: set GYRE_RANK, GYRE_WORLD_SIZE and GYRE_COMM_ID "
               "(or run under gyrerun, torchrun, mpirun or srun)");
  }

  if (const char* id = env("GYRE_COMM_ID")) {
    e.rootAddress = id;
  } else if (e.rootAddress.empty()) {
    if (!env("MASTER_ADDR") || !env("MASTER_PORT"))
      throwError(gyreInvalidUsage, "set MASTER_ADDR and MASTER_PORT, or GYRE_COMM_ID=host:port");
    e.rootAddress = std::string(env("MASTER_ADDR")) + ":" + env("MASTER_PORT");
  }
  if (const char* ext = env("GYRE_ROOT_EXTERNAL")) e.rootExternal = std::string(ext) == "1";
  const char* ompiKey = e.source == "openmpi" ? env("OMPI_MCA_orte_precondition_transports") : nullptr;
  if (!ompiKey && e.source == "openmpi") ompiKey = env("OMPI_MCA_opal_precondition_transports");
  if (const char* s = env("GYRE_SECRET")) {
    e.secret = parseSecretHex(s);
    e.secretSource = "GYRE_SECRET";
  } else if (ompiKey) {
    // mpirun draws it at random for each job and hands it only to the job's
    // processes: a secret nobody outside can compute.
    e.secret = deriveSecret("openmpi-key|" + std::string(ompiKey) + "|" + e.rootAddress + "|" +
                            std::to_string(e.nranks));
    e.secretSource = "the Open MPI job's key";
  } else {
    e.secret = deriveSecret(e.source + "|" + e.rootAddress + "|" + std::to_string(e.nranks) + "|" +
                            jobIdentity);
    e.secretSource = "derived from public facts";
    e.secretDerived = true;
  }
  return e;
}

}  // namespace gyre::bootstrap
