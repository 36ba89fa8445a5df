// RAYLOG(level) << ...: logging for programs written against Ray's C++ API.
//
//   RAYLOG(INFO) << "sum is " << sum;
//
// Levels DEBUG, INFO, WARNING, ERROR, FATAL. A line goes to stderr with its level,
// time, pid and source position; FATAL aborts the program after writing. Lines below
// the level named by the environment variable RAY_LOG_LEVEL (debug, info, warning,
// error; default info) are dropped without formatting their arguments. Thread-safe:
// each line is written whole.
#pragma once

#include <sstream>
#include <string>

namespace ray {

enum class RayLogLevel { DEBUG = -1, INFO = 0, WARNING = 1, ERROR = 2, FATAL = 3 };

namespace internal {

class RayLogMessage {
 public:
  RayLogMessage(const char* file, int line, RayLogLevel level) : file_(file), line_(line), level_(level) {}
  ~RayLogMessage();  // writes the line (src/api/logging.cc); aborts after FATAL
  RayLogMessage(const RayLogMessage&) = delete;
  RayLogMessage& operator=(const RayLogMessage&) = delete;
  std::ostream& stream() { return stream_; }
  // Whether lines of `level` are written.
  static bool IsEnabled(RayLogLevel level);

 private:
  const char* file_;
  int line_;
  RayLogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream expression of a dropped line.
struct RayLogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace internal
}  // namespace ray

#define RAY_LOG_ENABLED(level) ::ray::internal::RayLogMessage::IsEnabled(::ray::RayLogLevel::level)

#define RAYLOG(level)                    \
  !RAY_LOG_ENABLED(level) ? (void)0      \
                          : ::ray::internal::RayLogVoidify() & \
                                ::ray::internal::RayLogMessage(__FILE__, __LINE__, ::ray::RayLogLevel::level).stream()
