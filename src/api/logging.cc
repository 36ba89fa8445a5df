#include "ray/api/logging.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace ray {
namespace internal {
namespace {

RayLogLevel ThresholdFromEnvironment() {
  const char* value = std::getenv("RAY_LOG_LEVEL");
  if (value == nullptr) return RayLogLevel::INFO;
  std::string level(value);
  for (char& c : level) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (level == "debug") return RayLogLevel::DEBUG;
  if (level == "warning") return RayLogLevel::WARNING;
  if (level == "error") return RayLogLevel::ERROR;
  if (level == "fatal") return RayLogLevel::FATAL;
  return RayLogLevel::INFO;
}

const char* LevelName(RayLogLevel level) {
  switch (level) {
    case RayLogLevel::DEBUG:
      return "D";
    case RayLogLevel::INFO:
      return "I";
    case RayLogLevel::WARNING:
      return "W";
    case RayLogLevel::ERROR:
      return "E";
    case RayLogLevel::FATAL:
      return "F";
  }
  return "?";
}

}  // namespace

bool RayLogMessage::IsEnabled(RayLogLevel level) {
  static const RayLogLevel threshold = ThresholdFromEnvironment();
  return level >= threshold || level == RayLogLevel::FATAL;
}

RayLogMessage::~RayLogMessage() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  long micros = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char when[32];
  std::strftime(when, sizeof(when), "%m%d %H:%M:%S", &local);
  const char* base = file_;
  for (const char* p = file_; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  std::string line = std::string(LevelName(level_)) + when + "." + std::to_string(micros) + " " +
                     std::to_string(getpid()) + " " + base + ":" + std::to_string(line_) + "] " + stream_.str() + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (level_ == RayLogLevel::FATAL) std::abort();
}

}  // namespace internal
}  // namespace ray
