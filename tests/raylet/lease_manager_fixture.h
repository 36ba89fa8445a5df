// LeaseManagerTest: the fixture shared by the LeaseManager tests (lease_manager_test.cc,
// lease_manager_bundle_test.cc). A LeaseManager over a real WorkerPool with a fake
// launcher and a hand-fed cluster view; the test registers the "workers" the pool
// starts and drives the loop. No sockets, no sleeps.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "src/raylet/lease_manager.h"
#include "tests/raylet/fake_worker_launcher.h"

namespace manta::raylet {

// One RequestWorkerLease call: its reply, and its status once the reply was sent.
struct LeaseCall {
  rpc::RequestWorkerLeaseReply reply;
  std::optional<absl::Status> status;
  bool done() const { return status.has_value(); }
  bool granted() const { return done() && !reply.lease_id().empty(); }
};
using LeaseCallPtr = std::shared_ptr<LeaseCall>;

// The LeaseManager of a node with 2 CPUs (Make() rebuilds it with other resources),
// its WorkerPool, and the requests, returns, cancels and blocking notices its clients
// send, each followed by running the loop until idle.
class LeaseManagerTest : public ::testing::Test {
 protected:
  LeaseManagerTest() {
    config_.worker_register_timeout_ms = 1000000;
    config_.idle_worker_killing_time_ms = 1000000;
    config_.worker_maximum_startup_concurrency = 10;
    config_.num_workers_soft_limit = 10;
    config_.driver_liveness_check_ms = 1000000;
    pool_options_.node_id = local_id_;
    pool_options_.node_ip_address = "10.0.0.1";
    pool_options_.raylet_port = 7000;
    pool_options_.session_dir = "/tmp/session_l";
    pool_options_.num_cpus = 2;
    job_config_.add_worker_command("/bin/driver");
    owner_.set_node_id(local_id_.Binary());
    owner_.set_ip_address("10.0.0.1");
    owner_.set_port(30000);
    owner_.set_worker_id(WorkerID::FromRandom().Binary());
  }

  void SetUp() override { Make({{"CPU", 2}}); }

  void Make(scheduling::ResourceMap total) {
    lease_manager_.reset();
    pool_ = std::make_unique<WorkerPool>(loop_, pool_options_, config_, launcher_);
    pool_->SetJobConfig(job_, job_config_);  // the job's registration with the GCS
    lease_manager_ = std::make_unique<LeaseManager>(loop_, LeaseManagerOptions{local_id_, std::move(total)}, config_,
                                                    view_, *pool_, [](size_t) { return 0; });
  }

  rpc::RequestWorkerLeaseRequest MakeRequest(const scheduling::ResourceMap& resources) {
    rpc::RequestWorkerLeaseRequest request;
    request.set_lease_request_id(LeaseID::FromRandom().Binary());
    request.set_job_id(job_.Binary());
    *request.mutable_owner_address() = owner_;
    for (const auto& [k, v] : resources) (*request.mutable_required_resources())[k] = v;
    request.set_function_name("Plus");
    return request;
  }

  LeaseCallPtr Send(const rpc::RequestWorkerLeaseRequest& request) {
    auto call = std::make_shared<LeaseCall>();
    lease_manager_->HandleRequestWorkerLease(request, &call->reply,
                                             rpc::SendReply([call](absl::Status s) { call->status = s; }));
    loop_.RunUntilIdle();
    return call;
  }
  LeaseCallPtr Request(const scheduling::ResourceMap& resources) { return Send(MakeRequest(resources)); }

  // Registers every worker the pool started and that has not registered yet.
  void RegisterStarted() {
    for (; registered_ < launcher_.starts.size(); ++registered_) {
      const FakeWorkerLauncher::StartRecord& start = launcher_.starts[registered_];
      rpc::RegisterWorkerRequest request;
      request.set_worker_type(rpc::WORKER);
      request.set_startup_token(start.secrets.at("MANTA_WORKER_STARTUP_TOKEN"));
      request.set_worker_id(WorkerID::FromHex(start.env.at("MANTA_WORKER_ID"))->Binary());
      request.set_pid(start.pid);
      request.mutable_address()->set_ip_address("10.0.0.1");
      request.mutable_address()->set_port(20000 + static_cast<int>(registered_));
      rpc::RegisterWorkerReply reply;
      std::optional<absl::Status> sent;
      pool_->HandleRegisterWorker(request, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
      ASSERT_TRUE(sent.has_value() && sent->ok());
    }
    loop_.RunUntilIdle();
  }

  // Requests a lease and lets its worker register; the call must be granted.
  LeaseCallPtr Lease(const scheduling::ResourceMap& resources) {
    LeaseCallPtr call = Request(resources);
    RegisterStarted();
    EXPECT_TRUE(call->granted()) << call->reply.DebugString();
    return call;
  }

  void Return(const LeaseCallPtr& lease, bool disconnect = false) {
    rpc::ReturnWorkerRequest request;
    request.set_lease_id(lease->reply.lease_id());
    request.set_worker_id(lease->reply.worker_address().worker_id());
    request.set_disconnect_worker(disconnect);
    rpc::ReturnWorkerReply reply;
    std::optional<absl::Status> sent;
    lease_manager_->HandleReturnWorker(request, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
    ASSERT_TRUE(sent.has_value() && sent->ok());
    loop_.RunUntilIdle();
  }

  bool Cancel(const rpc::RequestWorkerLeaseRequest& request) {
    rpc::CancelWorkerLeaseRequest cancel;
    cancel.set_lease_request_id(request.lease_request_id());
    rpc::CancelWorkerLeaseReply reply;
    std::optional<absl::Status> sent;
    lease_manager_->HandleCancelWorkerLease(cancel, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
    EXPECT_TRUE(sent.has_value() && sent->ok());
    loop_.RunUntilIdle();
    return reply.success();
  }

  void Block(const LeaseCallPtr& lease, bool blocked) {
    rpc::NotifyWorkerBlockedRequest request;
    request.set_worker_id(lease->reply.worker_address().worker_id());
    request.set_blocked(blocked);
    rpc::NotifyWorkerBlockedReply reply;
    std::optional<absl::Status> sent;
    lease_manager_->HandleNotifyWorkerBlocked(request, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
    ASSERT_TRUE(sent.has_value() && sent->ok());
    loop_.RunUntilIdle();
  }

  NodeID AddNode(const scheduling::ResourceMap& total, const scheduling::ResourceMap& available,
                 const std::string& ip) {
    NodeID id = NodeID::FromRandom();
    rpc::NodeInfo info;
    info.set_node_id(id.Binary());
    info.set_node_manager_address(ip);
    info.set_node_manager_port(7777);
    for (const auto& [k, v] : total) (*info.mutable_resources_total())[k] = v;
    view_.OnNodeInfo(info);
    SetAvailable(id, available);
    return id;
  }
  void SetAvailable(const NodeID& id, const scheduling::ResourceMap& available) {
    rpc::ResourceUsage usage;
    usage.set_node_id(id.Binary());
    for (const auto& [k, v] : available) (*usage.mutable_resources_available())[k] = v;
    view_.OnResourceUsage(usage);
  }

  double Cpu() const { return lease_manager_->available().at("CPU"); }
  pid_t PidOf(const LeaseCallPtr& lease) const { return lease->reply.worker_pid(); }

  EventLoop loop_;
  Config config_;
  NodeID local_id_ = NodeID::FromRandom();
  WorkerPoolOptions pool_options_;
  FakeWorkerLauncher launcher_{loop_};
  scheduling::ClusterResourceView view_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<LeaseManager> lease_manager_;
  size_t registered_ = 0;
  JobID job_ = JobID::FromInt(7);
  rpc::JobConfig job_config_;
  rpc::Address owner_;
};

}  // namespace manta::raylet
