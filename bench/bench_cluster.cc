#include "bench_cluster.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <regex>
#include <stdexcept>
#include <thread>

#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::bench {

void Die(const std::string& message) { throw std::runtime_error(message); }

BenchCluster::BenchCluster() {
  char tmpl[] = "/tmp/manta_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp");
  root_ = tmpl;
}

BenchCluster::~BenchCluster() {
  RunManta({"stop", "--force"});
  // MANTA_KEEP_SESSION=1 keeps the logs for a look afterwards, as ray::Init's private
  // clusters do.
  if (std::getenv("MANTA_KEEP_SESSION") != nullptr) {
    std::cerr << "bench: the cluster's sessions are kept in " << root_ << std::endl;
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

std::string BenchCluster::RunManta(const std::vector<std::string>& args) const {
  std::string manta = FindExecutable("manta");
  if (manta.empty()) Die("cannot find the manta executable");
  ProcessOptions p;
  p.argv = {manta};
  p.argv.insert(p.argv.end(), args.begin(), args.end());
  p.env["MANTA_TEMP_DIR"] = root_;
  p.output_file = root_ + "/manta.out";
  std::filesystem::remove(p.output_file);
  auto pid = StartProcess(p);
  if (!pid.ok()) Die(std::string(pid.status().message()));
  if (!WaitForExit(*pid, 60000)) Die("manta " + args[0] + " did not finish");
  return ReadFile(p.output_file).value_or("");
}

void BenchCluster::StartHead(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"start", "--head", "--port", "0"};
  all.insert(all.end(), args.begin(), args.end());
  std::string out = RunManta(all);
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("GCS address:\\s+(\\S+)"))) Die("head did not start: " + out);
  gcs_address_ = m[1];
  // This process (the benchmark's driver and its own calls) joins with the head's token.
  auto token = FindSessionToken(root_, gcs_address_);
  if (!token.ok()) Die(std::string(token.status().message()));
  rpc::SetProcessCredentials(rpc::TokenCredentials(*token));
  setenv(kClusterTokenEnv, token->c_str(), 1);
  // Stops the cluster if this benchmark is killed before its destructor runs.
  ProcessOptions watchdog;
  watchdog.argv = {FindExecutable("manta"), "stop", "--force", "--after-pid", std::to_string(getpid())};
  watchdog.env["MANTA_TEMP_DIR"] = root_;
  watchdog.output_file = root_ + "/watchdog.out";
  watchdog.detach = true;  // survives a tree kill of this process
  (void)StartProcess(watchdog);
}

void BenchCluster::StartNode(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"start", "--address", gcs_address_};
  all.insert(all.end(), args.begin(), args.end());
  std::string out = RunManta(all);
  if (out.find("joined the cluster") == std::string::npos) Die("node did not start: " + out);
}

std::vector<rpc::NodeInfo> BenchCluster::Nodes() const {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs_address_, 64 << 20));
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  rpc::GetAllNodeInfoReply reply;
  grpc::Status s = stub->GetAllNodeInfo(&ctx, rpc::GetAllNodeInfoRequest(), &reply);
  if (!s.ok()) Die("GetAllNodeInfo: " + s.error_message());
  std::vector<rpc::NodeInfo> nodes;
  for (const auto& n : reply.node_info_list()) {
    if (n.state() == rpc::NodeInfo::ALIVE) nodes.push_back(n);
  }
  return nodes;
}

void BenchCluster::WaitForPrefault() const {
  for (const auto& node : Nodes()) {
    auto stub = rpc::NodeManagerService::NewStub(
        rpc::MakeChannel(node.node_manager_address() + ":" + std::to_string(node.node_manager_port()), 64 << 20));
    for (int i = 0; i < 1200; ++i) {
      grpc::ClientContext ctx;
      rpc::AttachClusterToken(&ctx);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      rpc::GetNodeStatsReply stats;
      if (!stub->GetNodeStats(&ctx, rpc::GetNodeStatsRequest(), &stats).ok()) Die("GetNodeStats");
      const auto& o = stats.usage().object_store();
      if (o.prefaulted_bytes() >= o.prefault_target_bytes()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace manta::bench
