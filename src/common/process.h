// Child processes: start, check, signal, wait. Used by the CLI to start daemons and
// (later) by the raylet's worker pool. All functions are thread-safe.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta {

struct ProcessOptions {
  // argv[0] is the executable path (looked up in PATH when it has no slash).
  std::vector<std::string> argv;
  // Added to (or replacing entries of) the parent's environment. The parent's own
  // secret variables (MANTA_CLUSTER_TOKEN, MANTA_REDIS_PASSWORD,
  // MANTA_WORKER_STARTUP_TOKEN) are never passed on; only `env` can set them.
  std::map<std::string, std::string> env;
  // Handed to the child through a pipe it inherits (its number in MANTA_SECRETS_FD),
  // never through its environment or command line, which other processes can read
  // (/proc/<pid>/environ, ps) for the child's whole life. The child takes them with
  // TakeInheritedSecrets(). At most 4 KiB in all.
  std::map<std::string, std::string> secrets;
  // stdout and stderr go here (appended) when set, else inherited; stderr goes to
  // error_file instead when that is set.
  std::string output_file;
  std::string error_file;
  // The child starts in this directory when set (else in the parent's). Opened
  // before it is entered, so output_file and a relative argv[0] are the parent's.
  std::string working_dir;
  // Starts the child in a new session, so it outlives the parent's terminal.
  bool new_session = false;
  // The child is started through an intermediate process that exits at once, so it
  // is not our child (nor a descendant that a tree kill of us finds) and is reaped
  // by init. The pid returned is still the child's. Implies new_session.
  bool detach = false;
  // The child gets SIGKILL when the parent dies (Linux PR_SET_PDEATHSIG). The kernel
  // ties this to the *thread* that forked: call StartProcess from a thread that lives
  // as long as the parent process (e.g. the daemon's loop thread on its main thread).
  bool die_with_parent = false;
};

// Starts the process. Returns its pid, or an error naming the executable when it
// cannot be started (exec failure is reported, not just a dead child); or
// FailedPrecondition naming working_dir when the child cannot enter it.
absl::StatusOr<pid_t> StartProcess(const ProcessOptions& options);

inline constexpr char kSecretsFdEnv[] = "MANTA_SECRETS_FD";

// The secrets the parent passed (ProcessOptions::secrets): read once, the pipe
// closed and MANTA_SECRETS_FD unset, so this process's children do not inherit them.
// Empty when none were passed; an error when the descriptor is not a pipe, its
// contents are malformed or over 4 KiB, or its writer has not finished within
// `timeout_ms` (the pipe is closed in every case).
absl::StatusOr<std::map<std::string, std::string>> TakeInheritedSecrets(int64_t timeout_ms = 5000);

// Raises this process's soft RLIMIT_NOFILE to its hard limit (every daemon does at
// start, so that many connections do not run it out of descriptors). Returns the
// soft limit now in force.
int64_t RaiseOpenFileLimit();

// True while `pid` exists and is not a zombie.
bool IsProcessAlive(pid_t pid);
// The process's command line (argv joined by spaces), empty if it is gone.
std::string ProcessCommandLine(pid_t pid);
// Sends `signal`; OK when the process is already gone.
absl::Status SignalProcess(pid_t pid, int signal);
// Reaps `pid` if it is our child and has exited; returns true if it is gone.
bool ReapIfExited(pid_t pid);
// Waits up to `timeout_ms` for `pid` to exit (reaping it when it is our child);
// returns as soon as it exits.
bool WaitForExit(pid_t pid, int64_t timeout_ms);
// Waits up to `timeout_ms` for our child `pid` to exit and reaps it: its exit code
// (128 + the signal's number when a signal ended it); DeadlineExceeded while it
// still runs, Internal when it is not our child.
absl::StatusOr<int> WaitForChildExit(pid_t pid, int64_t timeout_ms);
// Finds `name` next to this executable, then in PATH. Empty if not found.
std::string FindExecutable(const std::string& name);
// Path of the running executable.
std::string SelfExecutablePath();

}  // namespace manta
