// Session directories: where `manta start` records what it started, so that
// `manta stop` can stop exactly those processes (by pid, never by name).
//
// Layout under the temp root (TempRoot() in src/common/security.h: $MANTA_TEMP_DIR,
// default /tmp/manta-<uid>; 0700, and refused when another user owns it):
//   sessions/<name>/            one per `manta start`
//     logs/                     daemon logs and captured stdout/stderr
//     pids/<rank>_<role>.pid    "pid exe-name" per started process; rank orders stops
//     gcs_address               the cluster's GCS host:port
//     raylet_address            this node's raylet host:port (`manta health-check --node`)
//     cluster_token             the cluster's token (0600)
//   head_address                GCS address of the latest head started here
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::cli {

// Processes are stopped in rank order: raylets first, then the GCS, then Redis.
enum class Role { kRaylet = 0, kGcs = 1, kRedis = 2, kDashboard = 3 };

struct ProcessRecord {
  pid_t pid = 0;
  Role role = Role::kRaylet;
  std::string exe_name;   // must appear in /proc/<pid>/cmdline to be ours
  std::string pid_file;   // where the record lives
  std::string session_dir;
};

class Session {
 public:
  // Creates a new, uniquely named session directory with logs/ and pids/.
  static absl::StatusOr<Session> Create();
  const std::string& dir() const { return dir_; }
  std::string LogDir() const { return dir_ + "/logs"; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  absl::Status Record(pid_t pid, Role role, const std::string& exe_name) const;
  absl::Status WriteGcsAddress(const std::string& address) const;
  std::string TokenFile() const;

 private:
  std::string dir_;
};

// Every process record of every session under the temp root.
std::vector<ProcessRecord> ListRecords();
// The GCS address of the newest head started on this machine, else of the cluster
// the newest node still running here joined; NotFound when there is neither.
absl::StatusOr<std::string> LatestHeadAddress();
absl::Status WriteHeadAddress(const std::string& address);
std::string RoleName(Role role);

}  // namespace manta::cli
