// The calling thread's last error sentence, which gyreGetLastError returns:
// the C ABI layer sets it from the Error that ended a call.
#pragma once

#include <string>

namespace gyre {

// Never throws, even when memory has run out (the sentence is then cut to
// size).
void setLastError(const std::string& message) noexcept;
void setLastError(const char* function, const char* what) noexcept;  // "function: what"
const char* lastError();

}  // namespace gyre
