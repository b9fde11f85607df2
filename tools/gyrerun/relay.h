// The output relay: each rank's stdout and stderr arrive through a pipe and
// leave through gyrerun's own stdout and stderr, a whole line at a time with
// "[K] " before it, so that lines of different ranks never splice together.
#pragma once

#include <cstddef>
#include <string>

namespace gyre::run {

// One of gyrerun's own output descriptors. Write errors (a closed pipe
// downstream, a full disk) make it discard from then on: a job must not die
// because whoever reads its log went away.
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}
  void write(const char* data, size_t n);

 private:
  int fd_;
  bool broken_ = false;
};

// One rank's stream: the read end of its pipe and the partial line not yet
// passed on.
class RankStream {
 public:
  RankStream(int fd, int rank, bool prefix, Sink* sink);
  ~RankStream();
  RankStream(const RankStream&) = delete;
  RankStream& operator=(const RankStream&) = delete;

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  // One read (the pipe must be non-blocking); closes the stream at EOF.
  void pump();
  // Reads until the pipe is empty, then closes it: for a rank that has
  // exited, whose output is all in the pipe by now (a child it left behind
  // may hold the pipe open; its later output is not waited for).
  void drainAndClose();

 private:
  // false at EOF or on an error, when the stream should close.
  bool readOnce(bool* empty);
  void feed(const char* data, size_t n);
  void close();

  int fd_;
  std::string prefix_;  // "" when passing bytes through unchanged
  Sink* sink_;
  std::string partial_;
};

}  // namespace gyre::run
