#include "transport/ucx/ucx_teardown_log.h"

#include <ucs/debug/log_def.h>

#include <cstring>
#include <mutex>

namespace gyre::transport {

namespace {

// Whether this thread is in a scope, and what it took there (scopes do not
// nest: a transport closes its endpoints once).
thread_local bool tInScope = false;
thread_local int tFlushErrors = 0;
// UCX's list of handlers is a plain array: one scope at a time pushes and
// pops (communicators closing in several threads wait for each other here).
std::mutex gHandlerMu;

ucs_log_func_rc_t takeFlushErrors(const char*, unsigned, const char* function, ucs_log_level_t level,
                                  const ucs_log_component_config_t*, const char*, va_list) {
  if (tInScope && level == UCS_LOG_LEVEL_ERROR && function && std::strcmp(function, "ucp_ep_flush_error") == 0) {
    ++tFlushErrors;
    return UCS_LOG_FUNC_RC_STOP;
  }
  return UCS_LOG_FUNC_RC_CONTINUE;
}

}  // namespace

UcxTeardownLog::UcxTeardownLog() {
  gHandlerMu.lock();
  tInScope = true;
  tFlushErrors = 0;
  ucs_log_push_handler(takeFlushErrors);  // handlers run last pushed first
  handlers_ = ucs_log_num_handlers();
}

UcxTeardownLog::~UcxTeardownLog() {
  // Popped only if it is still the last: a handler someone pushed since
  // would be the one popped (ours then stays, passing everything on).
  if (ucs_log_num_handlers() == handlers_) ucs_log_pop_handler();
  tInScope = false;
  gHandlerMu.unlock();
}

int UcxTeardownLog::flushErrors() const { return tFlushErrors; }

}  // namespace gyre::transport
