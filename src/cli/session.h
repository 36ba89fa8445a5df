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
#include "src/common/session_processes.h"

namespace manta::cli {

using manta::ListRecords;
using manta::ProcessRecord;
using manta::Role;
using manta::RoleName;

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

}  // namespace manta::cli
