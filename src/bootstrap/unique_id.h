// The 128-byte gyreUniqueId: where the rendezvous root listens and the secret
// it requires. Also the secrets themselves.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "bootstrap/socket.h"
#include "gyre/gyre.h"

namespace gyre::bootstrap {

using Secret = std::array<uint8_t, 32>;

Secret randomSecret();
// A secret every rank of one job can compute from its environment alone (for
// launchers that pass no secret). It keeps other jobs out, not attackers.
Secret deriveSecret(const std::string& jobIdentity);
Secret parseSecretHex(const std::string& hex);  // throws on malformed input
std::string secretHex(const Secret& s);
bool secretsEqual(const Secret& a, const Secret& b);  // constant time

struct UniqueIdContents {
  SockAddr root;
  Secret secret{};
  // Made from GYRE_COMM_ID rather than around a live root: every process
  // that asks gets the same id, and the root opens at init (below).
  bool fromEnvironment = false;
  bool rankZeroHostsRoot = false;  // else a launcher already serves it
  // The secret was derived from public facts (no GYRE_SECRET): it keeps
  // other jobs out, but a stranger could compute it (see root_server.h).
  bool secretDerived = false;
};

void encodeUniqueId(const UniqueIdContents& c, gyreUniqueId* out);
// Throws Error(gyreInvalidArgument) when the bytes are not a gyre id.
UniqueIdContents decodeUniqueId(const gyreUniqueId& id);

}  // namespace gyre::bootstrap
