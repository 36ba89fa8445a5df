// The processes `manta start` records in its session directories, and stopping them.
// Shared by the `manta` CLI (start records them, stop and status read them) and by
// ray::Init's private clusters, which stop their own at Shutdown in-process.
//
// Records live under a temp root (TempRoot() in security.h, or a private cluster's):
//   <temp root>/sessions/<session>/pids/<rank>_<role>_<pid>.pid   "pid exe-name"
// A record's pid is signalled only while /proc/<pid>/cmdline still names exe-name
// (a pid may have been reused). All functions are thread-safe; they block.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace manta {

// The rank in a record's file name.
enum class Role { kRaylet = 0, kGcs = 1, kRedis = 2, kDashboard = 3, kAutoscaler = 4 };
// How long `manta stop` lets the autoscaler terminate the nodes it launched.
inline constexpr int64_t kAutoscalerStopGraceMs = 60000;
std::string RoleName(Role role);

struct ProcessRecord {
  pid_t pid = 0;
  Role role = Role::kRaylet;
  std::string exe_name;   // must appear in /proc/<pid>/cmdline to be ours
  std::string pid_file;   // where the record lives
  std::string session_dir;
};

// Every process record of every session under `temp_root`.
std::vector<ProcessRecord> ListRecords(const std::string& temp_root);
// Whether a recorded process under `temp_root` still runs.
bool AnyRecordedProcessRunning(const std::string& temp_root);

struct StopResult {
  int stopped = 0;
  int failed = 0;
  std::vector<std::string> messages;  // one line each, for stderr
};
// Stops every recorded process under `temp_root`, in batches: the autoscaler (up to
// kAutoscalerStopGraceMs: it terminates its nodes), the raylets and the dashboard (while the GCS still answers their goodbyes), then the GCS, then its
// Redis (SIGKILL: it keeps nothing on disk). SIGTERM (SIGKILL with `force`), and
// SIGKILL for one that ignores it for 5 s. Removes the records of the processes
// stopped, and <temp_root>/head_address.
StopResult StopRecordedProcesses(const std::string& temp_root, bool force);

}  // namespace manta
