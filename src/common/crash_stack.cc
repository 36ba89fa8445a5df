#include "src/common/crash_stack.h"

#include <signal.h>

#include <array>
#include <mutex>

#include <glog/logging.h>

namespace manta {

namespace {

// The signals glog's handler takes (signalhandler.cc).
constexpr std::array<int, 6> kGlogSignals = {SIGSEGV, SIGILL, SIGFPE, SIGABRT, SIGBUS, SIGTERM};

bool IsFatal(int sig) { return sig != SIGTERM; }

}  // namespace

void InstallCrashStackTraces() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::array<struct sigaction, kGlogSignals.size()> before{};
    for (size_t i = 0; i < kGlogSignals.size(); ++i) sigaction(kGlogSignals[i], nullptr, &before[i]);
    // glog unwinds with the compiler's unwind tables (no frame pointers needed),
    // prints, then dies of the signal with the default action.
    google::InstallFailureSignalHandler();
    // Give back every signal that was not ours to take.
    for (size_t i = 0; i < kGlogSignals.size(); ++i) {
      if (!IsFatal(kGlogSignals[i]) || before[i].sa_handler != SIG_DFL) {
        sigaction(kGlogSignals[i], &before[i], nullptr);
      }
    }
  });
}

}  // namespace manta
