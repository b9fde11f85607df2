// What a run leaves in /dev/shm: the tests that kill ranks check that no
// segment of theirs outlives them.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <set>
#include <span>
#include <string>
#include <vector>

namespace gyre::test {

inline std::set<std::string> shmNames() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

// Segments named after these processes ("gyre-<pid>-...") that were not
// there `before`: pids wrap (32768 here, and every thread takes one), so an
// earlier process with one of these pids (a rank killed by another test)
// may have left one under the same name.
inline std::vector<std::string> shmSegmentsOf(std::span<const pid_t> pids, const std::set<std::string>& before) {
  std::vector<std::string> left;
  for (const std::string& name : shmNames()) {
    if (before.count(name)) continue;
    for (pid_t pid : pids)
      if (name.rfind("gyre-" + std::to_string(pid) + "-", 0) == 0) left.push_back(name);
  }
  return left;
}

}  // namespace gyre::test
