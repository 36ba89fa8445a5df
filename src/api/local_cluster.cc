#include "src/api/local_cluster.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <csignal>

#include "src/api/install_location.h"
#include "src/common/process.h"
#include "src/common/session_processes.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace ray {
namespace internal {
namespace {

constexpr int64_t kStartTimeoutMs = 60000;

bool IsExecutable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Runs `argv` with MANTA_TEMP_DIR=`temp_root` and `secrets` on an inherited pipe,
// output to `log`; returns its exit code.
absl::StatusOr<int> RunManta(const std::vector<std::string>& argv, const std::string& temp_root,
                             const std::string& log, int64_t timeout_ms,
                             const std::map<std::string, std::string>& secrets = {}) {
  manta::ProcessOptions options;
  options.argv = argv;
  options.secrets = secrets;
  options.env["MANTA_TEMP_DIR"] = temp_root;
  options.output_file = log;
  auto pid = manta::StartProcess(options);
  if (!pid.ok()) return pid.status();
  absl::StatusOr<int> code = manta::WaitForChildExit(*pid, timeout_ms);
  if (absl::IsDeadlineExceeded(code.status())) {
    kill(*pid, SIGKILL);
    (void)manta::WaitForChildExit(*pid, 5000);
    return absl::DeadlineExceededError(argv[0] + " " + argv[1] + " did not finish within " +
                                       std::to_string(timeout_ms) + " ms");
  }
  if (!code.ok()) return absl::InternalError("waiting for " + argv[0] + " failed: " + std::string(code.status().message()));
  return *code;
}

std::string Tail(const std::string& path) {
  auto content = manta::ReadFile(path);
  if (!content.ok()) return "";
  std::string text = *content;
  if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::string LocalCluster::FindMantaExecutable(const std::string& name) {
  if (const char* dir = std::getenv("MANTA_BIN_DIR"); dir != nullptr && *dir != '\0') {
    std::string candidate = std::string(dir) + "/" + name;
    if (IsExecutable(candidate)) return candidate;
  }
  // The prefix of the shared libmanta this code is in (an installed package), next
  // to the program, the tree this library was built in, the prefix it installs to,
  // then PATH.
  if (std::string dir = InstalledBinDir(); !dir.empty() && IsExecutable(dir + "/" + name)) return dir + "/" + name;
  std::string self = manta::SelfExecutablePath();
  std::string subdir = name == "manta" ? "cli" : name == "manta_gcs" ? "gcs" : name == "manta_raylet" ? "raylet" : "api";
  for (const std::string& candidate : {self.substr(0, self.rfind('/') + 1) + name,
                                       std::string(MANTA_BUILD_DIR) + "/src/" + subdir + "/" + name,
                                       std::string(MANTA_INSTALL_BINDIR) + "/" + name}) {
    if (IsExecutable(candidate)) return candidate;
  }
  return manta::FindExecutable(name);
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const std::vector<std::string>& head_args,
                                                                  const std::map<std::string, std::string>& secrets) {
  std::string manta = FindMantaExecutable("manta");
  if (manta.empty()) {
    return absl::NotFoundError(
        "cannot find the `manta` executable to start a local cluster (looked in MANTA_BIN_DIR, next to this "
        "program, in " MANTA_BUILD_DIR " and " MANTA_INSTALL_BINDIR ", and in PATH); set RAY_ADDRESS to join an "
        "existing cluster instead");
  }
  std::string base = manta::TempRoot();
  if (auto s = manta::EnsurePrivateDir(base); !s.ok()) return s;
  std::string root = base + "/private/" + std::to_string(getpid()) + "-" + manta::SecureRandomHex(3);
  if (auto s = manta::EnsurePrivateDir(base + "/private"); !s.ok()) return s;
  if (auto s = manta::EnsurePrivateDir(root); !s.ok()) return s;
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(manta, root));
  std::vector<std::string> argv = {manta, "start", "--head", "--port", "0"};
  argv.insert(argv.end(), head_args.begin(), head_args.end());
  std::string log = root + "/start.out";
  auto code = RunManta(argv, root, log, kStartTimeoutMs, secrets);
  if (!code.ok() || *code != 0) {
    std::string why = code.ok() ? "exit code " + std::to_string(*code) : std::string(code.status().message());
    return absl::UnavailableError("starting a local cluster failed (" + why + "): " + Tail(log));
  }
  auto address = manta::ReadFile(root + "/head_address");
  if (!address.ok()) return absl::InternalError("the local cluster did not record its address: " + Tail(log));
  // A watchdog stops the cluster if this process dies without ray::Shutdown()
  // (Ctrl-C, a crash, SIGKILL); it exits by itself once the cluster is stopped.
  // Detached: a tree kill of this process (a test runner's timeout) must not take
  // the watchdog with it and leave the cluster running.
  manta::ProcessOptions watchdog;
  watchdog.argv = {manta, "stop", "--after-pid", std::to_string(getpid())};
  watchdog.env["MANTA_TEMP_DIR"] = root;
  watchdog.output_file = root + "/watchdog.out";
  watchdog.detach = true;
  auto watchdog_pid = manta::StartProcess(watchdog);
  if (watchdog_pid.ok()) {
    cluster->watchdog_pid_ = *watchdog_pid;
  } else {
    LOG(WARNING) << "no watchdog for the local cluster in " << root << ": " << watchdog_pid.status();
  }
  cluster->address_ = *address;
  while (!cluster->address_.empty() && (cluster->address_.back() == '\n' || cluster->address_.back() == ' ')) {
    cluster->address_.pop_back();
  }
  auto session = manta::FindSessionDir(root, cluster->address_);
  auto token = session.ok() ? manta::ReadTokenFile(*session + "/" + manta::kClusterTokenFileName)
                            : absl::StatusOr<std::string>(session.status());
  if (!token.ok()) return absl::InternalError("the local cluster's token: " + std::string(token.status().message()));
  cluster->token_ = std::move(*token);
  cluster->session_dir_ = std::move(*session);
  return cluster;
}

LocalCluster::~LocalCluster() { Stop(); }

void LocalCluster::Stop() {
  if (temp_root_.empty()) return;
  // In this process, as `manta stop` would (starting that program cost a fifth of a
  // Shutdown).
  const manta::StopResult stopped = manta::StopRecordedProcesses(temp_root_, /*force=*/false);
  for (const std::string& message : stopped.messages) LOG(WARNING) << "stopping the local cluster: " << message;
  if (stopped.failed > 0) {
    LOG(WARNING) << "stopping the local cluster in " << temp_root_ << " failed; its session is kept";
    return;  // keep the session for inspection
  }
  // Not our child (detached): signalled only while that pid is still the watchdog.
  if (watchdog_pid_ > 0 && manta::ProcessCommandLine(watchdog_pid_).find("--after-pid") != std::string::npos) {
    kill(watchdog_pid_, SIGTERM);
  }
  watchdog_pid_ = 0;
  if (std::getenv("MANTA_KEEP_SESSION") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(temp_root_, ec);
  }
  temp_root_.clear();
}

}  // namespace internal
}  // namespace ray
