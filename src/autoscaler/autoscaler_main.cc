// manta_autoscaler: the autoscaler's daemon on the head (`manta start --head
// --autoscaler FILE` starts it). Every update_interval_s it takes a snapshot of the
// cluster from the GCS (nodes, their reports, pending placement groups; a draining
// node's counts from its raylet), lets the Autoscaler decide (autoscaler.h), carries
// its actions out — provider calls on threads of their own, DrainNode on the GCS —
// and publishes its state in the GCS's internal KV (namespace "autoscaler", key
// "state") for `manta status` and the dashboard. On SIGTERM it terminates the nodes
// it launched (waiting up to the provider's timeout) and exits.
#include "src/autoscaler/autoscaler_main.h"

#include <glog/logging.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/autoscaler/autoscaler.h"
#include "src/autoscaler/autoscaler_state.h"
#include "src/autoscaler/node_provider.h"
#include "src/common/daemon.h"
#include "src/common/event_loop.h"
#include "src/common/flags.h"
#include "src/common/id.h"
#include "src/common/rpc/call_with_token.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace {

using manta::autoscaler::Autoscaler;
using manta::autoscaler::AutoscalerConfig;
using manta::autoscaler::ClusterSnapshot;
using manta::autoscaler::NodeSnapshot;
using manta::autoscaler::NodeTypeConfig;

constexpr int64_t kCallDeadlineS = 5;

// Runs provider calls on threads of their own; results come back on the loop.
class Actions final : public manta::autoscaler::ClusterActions {
 public:
  Actions(manta::EventLoop& loop, manta::autoscaler::NodeProvider& provider, std::shared_ptr<grpc::Channel> gcs)
      : loop_(loop), provider_(provider), gcs_(std::move(gcs)) {}
  ~Actions() override { JoinAll(); }

  void SetAutoscaler(Autoscaler* autoscaler) { autoscaler_ = autoscaler; }

  void Launch(const NodeTypeConfig& type, const std::string& instance_id) override {
    Spawn([this, type, instance_id] {
      absl::Status s = provider_.Launch(type, instance_id);
      if (s.ok()) return;
      loop_.Post("Autoscaler.LaunchFailed", [this, instance_id, s] {
        if (autoscaler_ != nullptr) autoscaler_->OnLaunchFailed(instance_id, std::string(s.message()));
      });
    });
  }
  void Terminate(const std::string& node_type, const std::string& instance_id) override {
    Spawn([this, node_type, instance_id] {
      absl::Status s = provider_.Terminate(node_type, instance_id);
      if (!s.ok()) LOG(ERROR) << "autoscaler: terminating " << instance_id << " failed: " << s;
    });
  }
  void Drain(const std::string& node_id_hex) override {
    auto id = manta::NodeID::FromHex(node_id_hex);
    if (!id.ok()) return;
    auto stub = manta::rpc::NodeInfoGcsService::NewStub(gcs_);
    manta::rpc::DrainNodeRequest request;
    request.set_node_id(id->Binary());
    request.set_reason("idle: the autoscaler removes it");
    manta::rpc::DrainNodeReply reply;
    grpc::Status s = manta::rpc::CallWithToken(*stub, &manta::rpc::NodeInfoGcsService::Stub::DrainNode, request,
                                               &reply, kCallDeadlineS);
    if (!s.ok()) LOG(WARNING) << "autoscaler: DrainNode " << node_id_hex << ": " << s.error_message();
  }

  // Waits for every provider call still running (at most `timeout_ms`).
  bool WaitIdle(int64_t timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (running_.load() > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    JoinAll();
    return true;
  }

 private:
  // One thread per provider call; those that finished are joined at the next spawn,
  // so a long-lived autoscaler keeps none around.
  struct Call {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void Spawn(std::function<void()> fn) {
    ++running_;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (!it->done->load()) {
        ++it;
        continue;
      }
      it->thread.join();
      it = calls_.erase(it);
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    calls_.push_back({std::thread([this, done, fn = std::move(fn)] {
                        fn();
                        done->store(true);
                        --running_;
                      }),
                      done});
  }
  void JoinAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Call& c : calls_) {
      if (c.thread.joinable()) c.thread.join();
    }
    calls_.clear();
  }

  manta::EventLoop& loop_;
  manta::autoscaler::NodeProvider& provider_;
  std::shared_ptr<grpc::Channel> gcs_;
  Autoscaler* autoscaler_ = nullptr;
  std::mutex mu_;
  std::vector<Call> calls_;
  std::atomic<int> running_{0};
};

NodeSnapshot ToSnapshot(const manta::rpc::NodeInfo& info, const manta::rpc::ResourceUsage* usage) {
  NodeSnapshot n;
  n.node_id = manta::NodeID::FromBinary(info.node_id()).Hex();
  n.is_head = info.is_head_node();
  n.draining = info.draining();
  n.node_type = info.node_type();
  n.instance_id = info.instance_id();
  n.total.insert(info.resources_total().begin(), info.resources_total().end());
  if (usage == nullptr) {
    n.available = n.total;
    return n;
  }
  n.total.clear();
  n.total.insert(usage->resources_total().begin(), usage->resources_total().end());
  n.available.insert(usage->resources_available().begin(), usage->resources_available().end());
  for (const manta::rpc::ResourceDemand& d : usage->resource_demands()) {
    manta::scheduling::ResourceMap shape(d.shape().begin(), d.shape().end());
    n.demands.emplace_back(std::move(shape), d.num_queued() + d.num_infeasible());
  }
  n.num_leases = usage->num_leases();
  n.primary_objects = usage->object_store().num_pinned();
  n.spilled_bytes = usage->object_store().spilled_bytes_current();
  return n;
}

// A draining node's counts straight from its raylet.
void AskRaylet(const manta::rpc::NodeInfo& info, NodeSnapshot* n) {
  auto channel = manta::rpc::MakeChannel(info.node_manager_address() + ":" + std::to_string(info.node_manager_port()),
                                         64 << 20);
  auto stub = manta::rpc::NodeManagerService::NewStub(channel);
  manta::rpc::GetNodeStatsReply stats;
  grpc::Status s = manta::rpc::CallWithToken(*stub, &manta::rpc::NodeManagerService::Stub::GetNodeStats,
                                             manta::rpc::GetNodeStatsRequest(), &stats, kCallDeadlineS);
  if (!s.ok()) return;
  NodeSnapshot fresh = ToSnapshot(info, &stats.usage());
  fresh.draining = n->draining;
  fresh.fresh = true;
  *n = std::move(fresh);
}

absl::StatusOr<ClusterSnapshot> TakeSnapshot(const std::shared_ptr<grpc::Channel>& gcs) {
  ClusterSnapshot snapshot;
  auto nodes_stub = manta::rpc::NodeInfoGcsService::NewStub(gcs);
  manta::rpc::GetAllNodeInfoReply nodes;
  grpc::Status s = manta::rpc::CallWithToken(*nodes_stub, &manta::rpc::NodeInfoGcsService::Stub::GetAllNodeInfo,
                                             manta::rpc::GetAllNodeInfoRequest(), &nodes, kCallDeadlineS);
  if (!s.ok()) return absl::UnavailableError("GetAllNodeInfo: " + s.error_message());
  std::map<std::string, const manta::rpc::ResourceUsage*> usage;
  for (const auto& u : nodes.resource_usage()) usage[u.node_id()] = &u;
  for (const manta::rpc::NodeInfo& info : nodes.node_info_list()) {
    if (info.state() != manta::rpc::NodeInfo::ALIVE) continue;
    auto u = usage.find(info.node_id());
    NodeSnapshot n = ToSnapshot(info, u == usage.end() ? nullptr : u->second);
    if (n.draining && !n.instance_id.empty()) AskRaylet(info, &n);
    snapshot.nodes.push_back(std::move(n));
  }
  auto pg_stub = manta::rpc::PlacementGroupInfoGcsService::NewStub(gcs);
  manta::rpc::GetAllPlacementGroupReply groups;
  s = manta::rpc::CallWithToken(*pg_stub, &manta::rpc::PlacementGroupInfoGcsService::Stub::GetAllPlacementGroup,
                                manta::rpc::GetAllPlacementGroupRequest(), &groups, kCallDeadlineS);
  if (!s.ok()) return absl::UnavailableError("GetAllPlacementGroup: " + s.error_message());
  for (const manta::rpc::PlacementGroupTableData& g : groups.placement_groups()) {
    if (g.state() != manta::rpc::PlacementGroupTableData::PENDING &&
        g.state() != manta::rpc::PlacementGroupTableData::RESCHEDULING) {
      continue;
    }
    manta::autoscaler::PendingGroup pending;
    pending.id = manta::PlacementGroupID::FromBinary(g.placement_group_id()).Hex();
    pending.strategy = manta::rpc::PlacementStrategy_Name(g.strategy());
    for (const manta::rpc::Bundle& b : g.bundles()) {
      if (b.node_id().empty()) pending.bundles.emplace_back(b.unit_resources().begin(), b.unit_resources().end());
    }
    if (!pending.bundles.empty()) snapshot.pending_groups.push_back(std::move(pending));
  }
  return snapshot;
}

void PublishState(const std::shared_ptr<grpc::Channel>& gcs, const nlohmann::json& state) {
  grpc::Status s = manta::autoscaler::PublishAutoscalerState(gcs, state);
  if (!s.ok()) LOG(WARNING) << "autoscaler: publishing its state: " << s.error_message();
}

// The config's provider; an error names what is wrong with it.
absl::StatusOr<std::unique_ptr<manta::autoscaler::NodeProvider>> MakeProvider(
    const AutoscalerConfig& config, const manta::autoscaler::ClusterContact& contact) {
  if (config.provider.type == "command") return manta::autoscaler::MakeCommandProvider(config.provider, contact);
  return manta::autoscaler::MakeKubernetesProvider(config.provider);
}

}  // namespace

int manta::autoscaler::AutoscalerMain(int argc, char** argv) {
  manta::FlagParser parser("manta_autoscaler: adds and removes nodes with demand");
  std::string gcs_address, config_path, ready_file;
  parser.Add("--gcs-address", &gcs_address, "GCS host:port").Required();
  parser.Add("--config", &config_path, "the autoscaler's config (JSON)").Required();
  parser.Add("--ready-file", &ready_file, "written once the first update is done");
  manta::DaemonFlags flags;
  manta::AddDaemonFlags(parser, &flags);
  if (auto exit_code = parser.Parse(argc, argv)) return *exit_code;
  auto daemon = manta::SetUpDaemon(argv[0], flags);
  if (!daemon.ok()) {
    std::cerr << "manta_autoscaler: " << daemon.status().message() << std::endl;
    return 2;
  }
  auto config = AutoscalerConfig::Load(config_path);
  if (!config.ok()) {
    std::cerr << "manta_autoscaler: " << config.status().message() << std::endl;
    return 2;
  }
  const std::string log_dir = flags.log_dir.empty() ? "." : flags.log_dir;
  manta::autoscaler::ClusterContact contact{gcs_address, flags.token_file, log_dir + "/autoscaler_commands.log"};
  auto provider = MakeProvider(*config, contact);
  if (!provider.ok()) {
    std::cerr << "manta_autoscaler: " << provider.status().message() << std::endl;
    return 2;
  }
  auto gcs = manta::rpc::MakeChannel(gcs_address, 64 << 20);
  manta::EventLoop loop(daemon->config.slow_handler_warn_ms);
  Actions actions(loop, **provider, gcs);
  Autoscaler autoscaler(*config, actions, [] { return "manta-" + manta::SecureRandomHex(6); });
  actions.SetAutoscaler(&autoscaler);
  const int64_t interval_ms = config->update_interval_ms;
  bool ready = false;
  std::function<void()> tick = [&] {
    auto snapshot = TakeSnapshot(gcs);
    if (snapshot.ok()) {
      autoscaler.Update(*snapshot, NowMs());
      PublishState(gcs, autoscaler.State());
      if (!ready && !ready_file.empty()) {
        ready = manta::WriteFileAtomic(ready_file, "0\n", 0600).ok();
      }
    } else {
      LOG(WARNING) << "autoscaler: no snapshot of the cluster: " << snapshot.status();
    }
    loop.PostAfter("Autoscaler.Update", interval_ms, [&] { tick(); });
  };
  loop.Post("Autoscaler.Update", [&] { tick(); });
  loop.OnTerminationSignal([&](int signo) {
    LOG(INFO) << "manta_autoscaler: signal " << signo << ", terminating the nodes it launched";
    autoscaler.TerminateAll();
    PublishState(gcs, autoscaler.State());
    loop.Stop();
  });
  loop.Run();
  if (!actions.WaitIdle(config->provider.command_timeout_ms + 5000)) {
    LOG(ERROR) << "provider calls still running at exit";
    std::_Exit(1);
  }
  return 0;
}
