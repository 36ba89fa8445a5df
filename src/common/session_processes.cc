#include "src/common/session_processes.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "src/common/process.h"

namespace manta {

namespace fs = std::filesystem;

std::string RoleName(Role role) {
  switch (role) {
    case Role::kRaylet:
      return "raylet";
    case Role::kGcs:
      return "gcs";
    case Role::kRedis:
      return "redis";
    case Role::kDashboard:
      return "dashboard";
    case Role::kAutoscaler:
      return "autoscaler";
  }
  return "unknown";
}

std::vector<ProcessRecord> ListRecords(const std::string& temp_root) {
  std::vector<ProcessRecord> records;
  std::error_code ec;
  fs::path sessions = temp_root + "/sessions";
  if (!fs::exists(sessions, ec)) return records;
  for (const auto& session : fs::directory_iterator(sessions, ec)) {
    fs::path pids = session.path() / "pids";
    if (!fs::is_directory(pids, ec)) continue;
    for (const auto& entry : fs::directory_iterator(pids, ec)) {
      std::string name = entry.path().filename().string();
      if (name.size() < 5 || name.substr(name.size() - 4) != ".pid") continue;
      std::ifstream in(entry.path());
      ProcessRecord r;
      int pid = 0;
      if (!(in >> pid >> r.exe_name) || pid <= 0) continue;
      r.pid = pid;
      r.role = static_cast<Role>(name[0] - '0');
      r.pid_file = entry.path().string();
      r.session_dir = session.path().string();
      records.push_back(r);
    }
  }
  return records;
}

namespace {

bool StillOurs(const ProcessRecord& r) {
  return IsProcessAlive(r.pid) && ProcessCommandLine(r.pid).find(r.exe_name) != std::string::npos;
}

}  // namespace

bool AnyRecordedProcessRunning(const std::string& temp_root) {
  for (const ProcessRecord& r : ListRecords(temp_root)) {
    if (StillOurs(r)) return true;
  }
  return false;
}

StopResult StopRecordedProcesses(const std::string& temp_root, bool force) {
  StopResult result;
  std::vector<ProcessRecord> records = ListRecords(temp_root);
  // The autoscaler first, alone: it terminates the nodes it launched (its provider's
  // commands) before anything else goes.
  const std::vector<std::vector<Role>> batches = {
      {Role::kAutoscaler}, {Role::kDashboard, Role::kRaylet}, {Role::kGcs}, {Role::kRedis}};
  for (const std::vector<Role>& roles : batches) {
    // Signal all of the batch, then wait: a big cluster stops quickly.
    std::vector<ProcessRecord*> batch;
    for (ProcessRecord& r : records) {
      if (std::find(roles.begin(), roles.end(), r.role) == roles.end()) continue;
      std::error_code ec;
      if (!StillOurs(r)) {
        fs::remove(r.pid_file, ec);
        continue;
      }
      // The Redis `manta start` runs keeps nothing on disk: SIGKILL loses nothing,
      // while SIGTERM waits for its next cron tick (up to 100 ms).
      (void)SignalProcess(r.pid, force || r.role == Role::kRedis ? SIGKILL : SIGTERM);
      batch.push_back(&r);
    }
    for (ProcessRecord* r : batch) {
      const int64_t grace_ms = force ? 2000 : r->role == Role::kAutoscaler ? kAutoscalerStopGraceMs : 5000;
      bool gone = WaitForExit(r->pid, grace_ms);
      if (!gone) {
        result.messages.push_back(RoleName(r->role) + " (pid " + std::to_string(r->pid) + ") ignored SIGTERM for " +
                                  std::to_string(grace_ms / 1000) + " s; killing it");
        (void)SignalProcess(r->pid, SIGKILL);
        gone = WaitForExit(r->pid, 2000);
      }
      std::error_code ec;
      if (gone) {
        ++result.stopped;
        fs::remove(r->pid_file, ec);
      } else {
        ++result.failed;
        result.messages.push_back("could not stop " + RoleName(r->role) + " (pid " + std::to_string(r->pid) + ")");
      }
    }
  }
  std::error_code ec;
  fs::remove(temp_root + "/head_address", ec);
  return result;
}

}  // namespace manta
