// `manta stop`: stops every process `manta start` started on this machine, found
// through the session directories' pid records (src/common/session_processes.h).
#include <chrono>
#include <iostream>
#include <thread>

#include "src/cli/commands.h"
#include "src/common/process.h"
#include "src/common/security.h"
#include "src/common/session_processes.h"

namespace manta::cli {

int RunStop(bool force, int after_pid) {
  if (after_pid > 0) {
    int ticks = 0;
    while (IsProcessAlive(after_pid)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      // Stopped by someone else meanwhile (the driver's own Shutdown): done.
      if (++ticks % 5 == 0 && !AnyRecordedProcessRunning(TempRoot())) return 0;
    }
  }
  const StopResult result = StopRecordedProcesses(TempRoot(), force);
  for (const std::string& message : result.messages) std::cerr << "manta stop: " << message << std::endl;
  if (result.stopped == 0 && result.failed == 0) {
    std::cout << "No Manta processes were running." << std::endl;
  } else {
    std::cout << "Stopped " << result.stopped << " Manta process" << (result.stopped == 1 ? "" : "es") << "."
              << std::endl;
  }
  return result.failed == 0 ? 0 : 1;
}

}  // namespace manta::cli
