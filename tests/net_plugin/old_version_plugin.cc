// A plugin with only a table older than gyre loads (v7): gyre must refuse
// it by name, saying which version it found. The table is never called.
struct OldTable {
  const char* name;
  void* calls[18];
};
extern "C" __attribute__((visibility("default"))) const OldTable ncclNetPlugin_v7 = {"old", {}};
