// A checkpoint's index.json, as a step directory on disk holds it
// (CheckpointReader checks its syntax, fields, shapes and runs). The file is
// written into one scratch directory per process, removed at exit.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/checkpoint.h"
#include "harness/json.h"

namespace {

struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    char tmpl[] = "/tmp/gyre-fuzz-ckpt-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    dir = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gyre::harness;
  static Scratch scratch;
  {
    std::ofstream out(scratch.dir / "index.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    CheckpointReader reader(scratch.dir);
    for (const auto& [tensor, kind] : reader.tensors()) (void)reader.globalShape(tensor, kind);
  } catch (const CheckpointError&) {
  } catch (const json::ParseError&) {
  }
  return 0;
}
