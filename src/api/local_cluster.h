// LocalCluster: the private cluster ray::Init() starts when it is given no address
// (no RayConfig::address, no RAY_ADDRESS).
//
// It runs `manta start --head --port 0 <head_args>` with its own temp root
// (MANTA_TEMP_DIR=<base>/private/<pid>-<random>), so stopping on destruction (what
// `manta stop` does, done in this process: StopRecordedProcesses) stops exactly this
// cluster and nothing else on the machine; the temp root is then removed (kept when
// MANTA_KEEP_SESSION is set, for debugging). A detached watchdog
// (`manta stop --after-pid <this process>`, not a descendant of this process, so a
// test runner's tree kill does not take it along) stops the cluster if the process
// dies without ray::Shutdown(). The `manta` executable is found through MANTA_BIN_DIR, next to the program, in the build
// tree, in the install prefix, then in PATH.
// Not thread-safe: owned by the native runtime.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ray {
namespace internal {

class LocalCluster {
 public:
  // Starts the cluster and waits until it accepts drivers. Errors carry the tail
  // of `manta start`'s output.
  // `secrets` (such as MANTA_REDIS_PASSWORD) reach `manta start` through an inherited
  // pipe (ProcessOptions::secrets), never its environment or `head_args`, which
  // other processes can read.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const std::vector<std::string>& head_args,
                                                             const std::map<std::string, std::string>& secrets = {});
  ~LocalCluster();

  // The GCS address ("127.0.0.1:port").
  const std::string& address() const { return address_; }
  const std::string& temp_root() const { return temp_root_; }
  // The cluster token `manta start` made for it.
  const std::string& token() const { return token_; }
  // The head's session directory (its token, its TLS files when it runs TLS).
  const std::string& session_dir() const { return session_dir_; }

  // Path of a Manta executable (`manta`, `manta_gcs`, ...), or empty.
  static std::string FindMantaExecutable(const std::string& name);

 private:
  LocalCluster(std::string manta, std::string temp_root) : manta_(std::move(manta)), temp_root_(std::move(temp_root)) {}
  void Stop();

  std::string manta_;
  std::string temp_root_;
  std::string address_;
  std::string token_;
  std::string session_dir_;
  pid_t watchdog_pid_ = 0;
};

}  // namespace internal
}  // namespace ray
