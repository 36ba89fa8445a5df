// Small helpers: clocks, files, ports, addresses. All thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace manta {

// Milliseconds since the Unix epoch (wall clock, for timestamps shown to people).
int64_t NowMs();

// Sizes and offsets from a peer or a file: `a + b` into *sum, false (nothing
// written) when it overflows or either is negative.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* sum) {
  return a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, sum);
}
// Whether [offset, offset + length) lies within [0, total), computed without the
// overflow of adding them.
inline bool RangeWithin(int64_t offset, int64_t length, int64_t total) {
  return offset >= 0 && length >= 0 && offset <= total && length <= total - offset;
}
// Milliseconds of a monotonic clock (for timeouts).
int64_t MonotonicMs();

// Writes `contents` to `path` atomically (temp file + rename), so a reader never sees
// a partial file. The file gets `mode` (before the umask).
absl::Status WriteFileAtomic(const std::string& path, std::string_view contents, int mode = 0644);
// Reads a whole file. NotFound when it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Asks the kernel for a currently free TCP port on 127.0.0.1. Racy by nature: the
// port may be taken before it is used; callers retry on bind failure.
absl::StatusOr<int> PickFreePort();
// True when something accepts TCP connections on host:port right now.
bool IsPortOpen(const std::string& host, int port);

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};
// Parses "host:port"; InvalidArgument naming the text when malformed.
absl::StatusOr<HostPort> ParseHostPort(std::string_view text);

}  // namespace manta
