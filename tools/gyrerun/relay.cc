#include "relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace gyre::run {

namespace {
// A "line" longer than this (a progress bar redrawn with \r, a binary dump) is
// passed on in pieces, each on a line of its own, rather than held forever.
constexpr size_t kMaxLine = 64 * 1024;
}  // namespace

void Sink::write(const char* data, size_t n) {
  while (n > 0 && !broken_) {
    ssize_t w = ::write(fd_, data, n);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) {
      // Someone made our inherited descriptor non-blocking; wait for room.
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else {
      broken_ = true;
    }
  }
}

RankStream::RankStream(int fd, int rank, bool prefix, Sink* sink)
    : fd_(fd), prefix_(prefix ? "[" + std::to_string(rank) + "] " : ""), sink_(sink) {}

RankStream::~RankStream() { close(); }

void RankStream::close() {
  if (fd_ < 0) return;
  if (!partial_.empty()) {
    // A last line without its newline: end it, or the next rank's line
    // would continue it.
    std::string last = prefix_ + partial_ + '\n';
    sink_->write(last.data(), last.size());
    partial_.clear();
  }
  ::close(fd_);
  fd_ = -1;
}

bool RankStream::readOnce(bool* empty) {
  char buf[64 * 1024];
  *empty = false;
  ssize_t n = ::read(fd_, buf, sizeof(buf));
  if (n > 0) {
    feed(buf, static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
    *empty = errno == EAGAIN;
    return true;
  }
  return false;  // EOF, or the pipe broke
}

void RankStream::pump() {
  if (fd_ < 0) return;
  bool empty;
  if (!readOnce(&empty)) close();
}

void RankStream::drainAndClose() {
  bool empty = false;
  while (fd_ >= 0 && !empty && readOnce(&empty)) {
  }
  close();
}

void RankStream::feed(const char* data, size_t n) {
  if (prefix_.empty()) {
    sink_->write(data, n);
    return;
  }
  // Collect every complete line of this read into one write, each with the
  // prefix; keep the unfinished rest for the next read.
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    if (data[i] != '\n') continue;
    out += prefix_;
    out += partial_;
    partial_.clear();
    out.append(data + start, i + 1 - start);
    start = i + 1;
  }
  partial_.append(data + start, n - start);
  while (partial_.size() >= kMaxLine) {
    out += prefix_;
    out.append(partial_, 0, kMaxLine);
    out += '\n';
    partial_.erase(0, kMaxLine);
  }
  if (!out.empty()) sink_->write(out.data(), out.size());
}

}  // namespace gyre::run
