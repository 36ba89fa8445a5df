// `manta stop`: stops every process `manta start` started on this machine, found
// through the session directories' pid records: raylets first, then GCS, then Redis.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "src/cli/commands.h"
#include "src/cli/session.h"
#include "src/common/security.h"
#include "src/common/process.h"

namespace manta::cli {

namespace {

bool AnyRecordedProcessRunning() {
  for (const ProcessRecord& r : ListRecords()) {
    if (IsProcessAlive(r.pid) && ProcessCommandLine(r.pid).find(r.exe_name) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

int RunStop(bool force, int after_pid) {
  if (after_pid > 0) {
    int ticks = 0;
    while (IsProcessAlive(after_pid)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      // Stopped by someone else meanwhile (the driver's own Shutdown): done.
      if (++ticks % 5 == 0 && !AnyRecordedProcessRunning()) return 0;
    }
  }
  std::vector<ProcessRecord> records = ListRecords();
  std::stable_sort(records.begin(), records.end(),
                   [](const ProcessRecord& a, const ProcessRecord& b) { return a.role < b.role; });
  int stopped = 0;
  int failed = 0;
  // One batch of roles at a time: signal all of them, then wait, so a big cluster
  // stops quickly. Raylets (and the dashboard, a client of the GCS only) go while the
  // GCS still answers their goodbyes; then the GCS, then its Redis.
  const std::vector<std::vector<Role>> batches = {{Role::kDashboard, Role::kRaylet}, {Role::kGcs}, {Role::kRedis}};
  for (const std::vector<Role>& roles : batches) {
    std::vector<ProcessRecord*> batch;
    for (auto& r : records) {
      if (std::find(roles.begin(), roles.end(), r.role) == roles.end()) continue;
      // A recorded pid may since have been reused by an unrelated process: only
      // signal it when its command line still names the program we started.
      if (!IsProcessAlive(r.pid) || ProcessCommandLine(r.pid).find(r.exe_name) == std::string::npos) {
        std::filesystem::remove(r.pid_file);
        continue;
      }
      // The Redis `manta start` runs keeps nothing on disk (RedisConfig): SIGKILL loses
      // nothing, while SIGTERM waits for its next cron tick (up to 100 ms).
      (void)SignalProcess(r.pid, force || r.role == Role::kRedis ? SIGKILL : SIGTERM);
      batch.push_back(&r);
    }
    for (ProcessRecord* r : batch) {
      bool gone = WaitForExit(r->pid, force ? 2000 : 5000);
      if (!gone) {
        std::cerr << "manta stop: " << RoleName(r->role) << " (pid " << r->pid
                  << ") ignored SIGTERM for 5 s; killing it" << std::endl;
        (void)SignalProcess(r->pid, SIGKILL);
        gone = WaitForExit(r->pid, 2000);
      }
      if (gone) {
        ++stopped;
        std::filesystem::remove(r->pid_file);
      } else {
        ++failed;
        std::cerr << "manta stop: could not stop " << RoleName(r->role) << " (pid " << r->pid << ")" << std::endl;
      }
    }
  }
  std::error_code ec;
  std::filesystem::remove(TempRoot() + "/head_address", ec);
  if (stopped == 0 && failed == 0) {
    std::cout << "No Manta processes were running." << std::endl;
  } else {
    std::cout << "Stopped " << stopped << " Manta process" << (stopped == 1 ? "" : "es") << "." << std::endl;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace manta::cli
