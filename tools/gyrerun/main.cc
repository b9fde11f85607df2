// gyrerun -n N [options] [--] program [args...]: the local launcher. It hosts
// the rendezvous root for the job (a persistent one, so that every
// gyreCommInitFromEnv of the ranks, round after round, meets there) and
// hands each rank the GYRE_* environment pointing at it.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <memory>

#include "bootstrap/root_server.h"
#include "bootstrap/unique_id.h"
#include "options.h"
#include "signals.h"
#include "spawn.h"
#include "supervisor.h"

namespace {

// A launcher started with a standard descriptor closed would hand that
// number to a pipe, and a rank would then write its output into it.
void openMissingStandardFds() {
  for (int fd = 0; fd <= 2; ++fd)
    if (fcntl(fd, F_GETFD) < 0) {
      int null = ::open("/dev/null", O_RDWR);
      if (null >= 0 && null != fd) {
        dup2(null, fd);
        ::close(null);
      }
    }
}

// Two pipes per rank: 4096 ranks need more than the usual 1024 descriptors.
rlimit raiseFileLimit() {
  rlimit original{};
  getrlimit(RLIMIT_NOFILE, &original);
  rlimit raised = original;
  raised.rlim_cur = original.rlim_max;
  setrlimit(RLIMIT_NOFILE, &raised);
  return original;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gyre::run;
  openMissingStandardFds();
  ParseResult parsed = parseOptions(argc, argv);
  if (parsed.action == ParseResult::Action::Exit) {
    std::fputs(parsed.message.c_str(), parsed.toStderr ? stderr : stdout);
    return parsed.exitCode;
  }
  const Options& options = parsed.options;
  try {
    // Before the root's thread exists, so that it inherits the blocked mask
    // and never takes a signal meant for the signalfd.
    SignalChannel signals;
    rlimit fileLimit = raiseFileLimit();

    gyre::bootstrap::RootServer::Options ro;
    ro.bind = gyre::bootstrap::SockAddr::loopback(AF_INET, 0);
    ro.advertise = gyre::bootstrap::SockAddr::loopback(AF_INET, 0);
    ro.secret = gyre::bootstrap::randomSecret();
    ro.persistent = true;
    std::shared_ptr<gyre::bootstrap::RootServer> root = gyre::bootstrap::RootServer::start(ro);

    Environment env;
    for (const auto& [name, value] : options.env) env.set(name, value);
    // gyrerun's own settings win over -x: they are what makes the job one job.
    env.set("GYRE_WORLD_SIZE", std::to_string(options.nranks));
    env.set("GYRE_LOCAL_SIZE", std::to_string(options.nranks));
    env.set("GYRE_COMM_ID", root->address().str());
    env.set("GYRE_SECRET", gyre::bootstrap::secretHex(root->secret()));
    env.set("GYRE_ROOT_EXTERNAL", "1");

    Supervisor supervisor(options, signals, std::move(env), fileLimit);
    int code = supervisor.run();
    root->stop();
    return code;
  } catch (const std::exception& e) {
    // The ranks die with us (PR_SET_PDEATHSIG).
    std::fprintf(stderr, "gyrerun: %s\n", e.what());
    return 1;
  }
}
