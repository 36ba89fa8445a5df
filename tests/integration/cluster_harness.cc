#include "cluster_harness.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "protos/gcs.grpc.pb.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/cluster_tls.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::testing {

namespace fs = std::filesystem;

ClusterHarness::ClusterHarness() = default;

ClusterHarness::~ClusterHarness() {
  for (pid_t pid : restarted_gcs_) {
    kill(pid, SIGKILL);
    WaitForExit(pid, 5000);
  }
  Manta({"stop", "--force"}, {}, 30000);
  for (pid_t pid : LivePids()) {
    ADD_FAILURE() << "pid " << pid << " survived `manta stop --force`";
    kill(pid, SIGKILL);
    WaitForExit(pid, 5000);
  }
}

CommandResult ClusterHarness::Manta(const std::vector<std::string>& args,
                                    const std::vector<std::pair<std::string, std::string>>& extra_env,
                                    int64_t timeout_ms) {
  std::vector<std::string> argv = {BinaryPath("manta")};
  argv.insert(argv.end(), args.begin(), args.end());
  auto env = extra_env;
  env.emplace_back("MANTA_TEMP_DIR", root_.path());
  env.emplace_back("RAY_ADDRESS", "");
  return RunCommand(argv, env, timeout_ms);
}

namespace {

// Test nodes get a small object store unless a test asks otherwise: many raylets
// run at once on a CI machine, and each pre-faults its whole store.
void AddDefaultStoreSize(std::vector<std::string>* args) {
  if (std::find(args->begin(), args->end(), "--object-store-memory") == args->end()) {
    args->insert(args->end(), {"--object-store-memory", std::to_string(64 << 20)});
  }
}

}  // namespace

std::string ClusterHarness::StartHead(const std::vector<std::string>& extra_args,
                                     const std::vector<std::pair<std::string, std::string>>& extra_env) {
  std::vector<std::string> args = {"start", "--head", "--port", "0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  AddDefaultStoreSize(&args);
  CommandResult r = Manta(args, extra_env);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("GCS address:\\s+(\\S+)"))) gcs_address_ = m[1];
  EXPECT_FALSE(gcs_address_.empty()) << r.output;
  auto token = FindSessionToken(root_.path(), gcs_address_);
  EXPECT_TRUE(token.ok()) << token.status();
  if (token.ok()) {
    token_ = *token;
    // With TLS (cluster_tls=on), the head's certificate from its session.
    rpc::Credentials credentials = rpc::TokenCredentials(token_);
    EXPECT_TRUE(AddSessionTls(HeadSessionDir(), &credentials).ok());
    rpc::SetProcessCredentials(credentials);
    setenv(kClusterTokenEnv, token_.c_str(), 1);
  }
  // Stops this harness's clusters if the test binary dies before its destructor.
  ProcessOptions watchdog;
  watchdog.argv = {BinaryPath("manta"), "stop", "--force", "--after-pid", std::to_string(getpid())};
  watchdog.env["MANTA_TEMP_DIR"] = root_.path();
  watchdog.output_file = root_.path() + "/watchdog.out";
  watchdog.detach = true;  // survives a tree kill of this process (a CTest timeout)
  (void)StartProcess(watchdog);
  return gcs_address_;
}

void ClusterHarness::StartNode(const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"start", "--address", gcs_address_};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  AddDefaultStoreSize(&args);
  CommandResult r = Manta(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

nlohmann::json ClusterHarness::Status() {
  CommandResult r = Manta({"status", "--json", "--address", gcs_address_}, {}, 20000);
  auto j = r.exit_code == 0 ? nlohmann::json::parse(r.output, nullptr, false) : nlohmann::json();
  if (r.exit_code != 0 || j.is_discarded()) {
    // Callers poll through failures; say what failed, for when one is not expected.
    std::cerr << "manta status failed (exit " << r.exit_code << "): " << r.output << std::endl;
    return nlohmann::json::object();
  }
  return j;
}

double ClusterHarness::AvailableCpus() {
  nlohmann::json status = Status();
  if (!status.contains("nodes")) return -1;
  double cpus = 0;
  for (const auto& node : status["nodes"]) {
    if (node["state"] == "ALIVE") cpus += node["resources_available"].value("CPU", 0.0);
  }
  return cpus;
}

int ClusterHarness::CountNodes(const std::string& state) {
  nlohmann::json s = Status();
  int n = 0;
  if (s.contains("nodes")) {
    for (const auto& node : s["nodes"]) n += node["state"] == state ? 1 : 0;
  }
  return n;
}

std::vector<rpc::NodeInfo> ClusterHarness::AliveNodes() const {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs_address_, 64 << 20));
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  rpc::GetAllNodeInfoReply reply;
  grpc::Status s = stub->GetAllNodeInfo(&ctx, rpc::GetAllNodeInfoRequest(), &reply);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::vector<rpc::NodeInfo> nodes;
  for (const auto& n : reply.node_info_list()) {
    if (n.state() == rpc::NodeInfo::ALIVE) nodes.push_back(n);
  }
  return nodes;
}

std::vector<pid_t> ClusterHarness::Pids(const std::string& role) const {
  std::vector<pid_t> pids;
  std::error_code ec;
  fs::path sessions = fs::path(root_.path()) / "sessions";
  if (!fs::exists(sessions, ec)) return pids;
  for (const auto& s : fs::directory_iterator(sessions, ec)) {
    for (const auto& f : fs::directory_iterator(s.path() / "pids", ec)) {
      std::string name = f.path().filename().string();
      if (!role.empty() && name.find("_" + role + "_") == std::string::npos) continue;
      std::ifstream in(f.path());
      int pid = 0;
      if (in >> pid && IsProcessAlive(pid)) pids.push_back(pid);
    }
  }
  return pids;
}

std::vector<pid_t> ClusterHarness::LivePids() const { return Pids(""); }

std::string ClusterHarness::HeadSessionDir() const {
  std::error_code ec;
  for (const auto& s : fs::directory_iterator(fs::path(root_.path()) / "sessions", ec)) {
    if (fs::exists(s.path() / "redis_password", ec)) return s.path().string();
  }
  return "";
}

std::vector<std::string> ClusterHarness::GcsArgs() const {
  return {"--redis-address", RedisAddress(), "--redis-password-file", HeadSessionDir() + "/redis_password",
          "--token-file", HeadSessionDir() + "/" + kClusterTokenFileName};
}

absl::StatusOr<pid_t> ClusterHarness::RestartGcs(const std::string& system_config) {
  std::vector<pid_t> running = Pids("gcs");
  for (pid_t pid : restarted_gcs_) {
    if (kill(pid, 0) == 0) running.push_back(pid);
  }
  for (pid_t pid : running) {
    kill(pid, SIGKILL);
    if (!WaitForExit(pid, 5000)) return absl::InternalError("the GCS (pid " + std::to_string(pid) + ") did not exit");
  }
  auto address = ParseHostPort(gcs_address_);
  if (!address.ok()) return address.status();
  const std::string tag = std::to_string(restarted_gcs_.size() + 2);
  ProcessOptions p;
  p.argv = {BinaryPath("manta_gcs"), "--port", std::to_string(address->port), "--ready-file",
            root_.path() + "/gcs" + tag + ".ready"};
  if (!system_config.empty()) {
    p.argv.push_back("--system-config");
    p.argv.push_back(system_config);
  }
  for (const std::string& arg : GcsArgs()) p.argv.push_back(arg);
  p.output_file = root_.path() + "/gcs" + tag + ".out";
  auto pid = StartProcess(p);
  if (!pid.ok()) return pid.status();
  restarted_gcs_.push_back(*pid);
  bool exited = false;
  const bool ready = WaitFor(
      [&] {
        exited = ReapIfExited(*pid);
        return exited || ReadFile(root_.path() + "/gcs" + tag + ".ready").ok();
      },
      15000);
  const std::string output = "; its output: " + ReadFile(p.output_file).value_or("(none)");
  if (exited) return absl::InternalError("the restarted GCS exited" + output);
  if (!ready) return absl::DeadlineExceededError("the restarted GCS did not become ready in 15 s" + output);
  return *pid;
}

std::string ClusterHarness::RedisAddress() const {
  std::error_code ec;
  for (const auto& s : fs::directory_iterator(fs::path(root_.path()) / "sessions", ec)) {
    for (const auto& f : fs::directory_iterator(s.path() / "pids", ec)) {
      if (f.path().filename().string().find("_redis_") == std::string::npos) continue;
      std::ifstream in(f.path());
      int pid = 0;
      in >> pid;
      std::smatch m;
      std::string cmd = ProcessCommandLine(pid);
      if (std::regex_search(cmd, m, std::regex("(127\\.0\\.0\\.1:\\d+)"))) return m[1];
    }
  }
  return "";
}

}  // namespace manta::testing
