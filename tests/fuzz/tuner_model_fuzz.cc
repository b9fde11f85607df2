// The tuner's model file (GYRE_TUNER_FILE: key = value lines,
// CostModel::parse). A model that loads is written out and must load again.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "collectives/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gyre::collectives::CostModel;
  CostModel m;
  try {
    m = CostModel::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const gyre::Error&) {
    return 0;
  }
  (void)m.fingerprint();
  (void)CostModel::parse(m.format(), "formatted");  // throws (a finding) if format() wrote what parse refuses
  return 0;
}
