// Adds what the driver's libraries say, looked up under their default names
// as the library does in production, to a topology file's graph and prints
// the result as XML. gpu_driver_test runs it with the fake libraries first
// on LD_LIBRARY_PATH (a variable the dynamic loader reads only when a
// process starts, hence a process of its own).
#include <exception>
#include <iostream>

#include "topology/detect_gpu.h"
#include "topology/topology_io.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gpu_driver_probe TOPOLOGY_FILE\n";
    return 2;
  }
  try {
    gyre::topology::Graph g = gyre::topology::loadTopologyFile(argv[1]);
    gyre::topology::addDriverInformation(g);
    std::cout << gyre::topology::toXml(g);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
