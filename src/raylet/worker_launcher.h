// WorkerLauncherInterface: how the worker pool acts on worker processes — start one,
// signal it, check that a pid still runs, and ask a worker to exit politely.
//
// ProcessWorkerLauncher (process_worker_launcher.h) is the real implementation;
// tests use an in-process fake that records starts and lets the test decide what
// happens. Loop thread only; callbacks run on the loop, never inline.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "protos/common.pb.h"

namespace manta::raylet {

// Where a worker's output goes: its stdout and its stderr, each appended to a file of
// its own (kept apart as a driver prints them: ARCHITECTURE.md §18).
struct WorkerOutputFiles {
  std::string out;
  std::string err;
};

class WorkerLauncherInterface {
 public:
  virtual ~WorkerLauncherInterface() = default;

  // Starts `argv` with `env` added to the raylet's environment and `secrets` handed
  // over through an inherited pipe (ProcessOptions::secrets), in `working_dir`
  // (empty: the raylet's), stdout and stderr appended to `output`'s files (their
  // directories are created). The process is killed when the raylet dies. Returns its pid, or an
  // error naming what could not be started (FailedPrecondition when working_dir
  // cannot be entered).
  virtual absl::StatusOr<pid_t> Start(const std::vector<std::string>& argv,
                                      const std::map<std::string, std::string>& env,
                                      const std::map<std::string, std::string>& secrets,
                                      const std::string& working_dir, const WorkerOutputFiles& output) = 0;
  // Sends `signal` to `pid`; a process already gone is not an error.
  virtual void Signal(pid_t pid, int signal) = 0;
  // Asks the core worker at `address` to exit (CoreWorkerService.Exit, not forced).
  // `callback(status, accepted)`: accepted is false when the worker refused because
  // it still owns objects in use; status is not OK when the RPC failed.
  virtual void AsyncRequestExit(const rpc::Address& address,
                                std::function<void(const absl::Status&, bool accepted)> callback) = 0;
};

}  // namespace manta::raylet
