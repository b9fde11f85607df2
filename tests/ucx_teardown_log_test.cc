// UcxTeardownLog: inside its scope, UCX's error line for a failed endpoint
// flush is taken and counted; any other line, a line from another thread,
// and every line after the scope reach UCX's other handlers as before.
#include "transport/ucx/ucx_teardown_log.h"

#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <string>
#include <thread>
#include <vector>

namespace {

// What reached the handler below ours (UCX's printer is below both: the
// capture stops each line so the test prints nothing).
std::vector<std::string> gSeen;

ucs_log_func_rc_t capture(const char*, unsigned, const char* function, ucs_log_level_t, const ucs_log_component_config_t*,
                          const char*, va_list) {
  gSeen.emplace_back(function ? function : "");
  return UCS_LOG_FUNC_RC_STOP;
}

void log(const char* function) {
  ucs_log_dispatch(__FILE__, __LINE__, function, UCS_LOG_LEVEL_ERROR, &ucs_global_opts.log_component, "%s",
                   "req 0x0: error during flush: Endpoint timeout");
}

TEST(UcxTeardownLog, TakesOnlyThisThreadsFlushErrorsInsideItsScope) {
  gSeen.clear();
  ucs_log_push_handler(capture);
  const unsigned before = ucs_log_num_handlers();
  {
    gyre::transport::UcxTeardownLog quiet;
    log("ucp_ep_flush_error");
    log("ucp_ep_flush_error");
    log("uct_tcp_ep_handle_disconnected");  // not a flush's line
    std::thread([] { log("ucp_ep_flush_error"); }).join();  // not this thread's
    EXPECT_EQ(quiet.flushErrors(), 2);
  }
  EXPECT_EQ(ucs_log_num_handlers(), before) << "the scope's handler is gone";
  log("ucp_ep_flush_error");  // after the scope
  ucs_log_pop_handler();
  const std::vector<std::string> expected = {"uct_tcp_ep_handle_disconnected", "ucp_ep_flush_error",
                                             "ucp_ep_flush_error"};
  EXPECT_EQ(gSeen, expected);
}

}  // namespace
