// FakeRayletClient: the in-process fake of RayletClientInterface for unit tests.
//
// Lease requests are recorded and answered by the test (Grant, SpillTo, Reject,
// PlaceAgain);
// returned and cancelled leases, frees and fetches are recorded and answered at once
// (fetches held for ReplyFetch when `hold_fetches`); the other calls succeed at
// once. Not thread-safe: for tests that drive one loop.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "src/common/id.h"
#include "src/raylet/raylet_client.h"

namespace manta::raylet {

class FakeRayletClient : public RayletClientInterface {
 public:
  template <typename Request, typename Reply>
  struct Pending {
    Request request;
    Callback<Reply> callback;
  };

  explicit FakeRayletClient(std::string address) : address_(std::move(address)) {}
  const std::string& address() const override { return address_; }
  void RegisterWorker(const rpc::RegisterWorkerRequest&, Callback<rpc::RegisterWorkerReply> cb) override {
    cb(absl::UnimplementedError("FakeRayletClient: RegisterWorker is not faked"), {});
  }
  void RequestWorkerLease(const rpc::RequestWorkerLeaseRequest& q, Callback<rpc::RequestWorkerLeaseReply> cb) override {
    leases.push_back({q, std::move(cb)});
  }
  void ReturnWorker(const rpc::ReturnWorkerRequest& q, Callback<rpc::ReturnWorkerReply> cb) override {
    returns.push_back(q);
    cb(absl::OkStatus(), {});
  }
  void CancelWorkerLease(const rpc::CancelWorkerLeaseRequest& q, Callback<rpc::CancelWorkerLeaseReply> cb) override {
    cancels.push_back(q);
    rpc::CancelWorkerLeaseReply reply;
    for (auto it = leases.begin(); it != leases.end(); ++it) {
      if (it->request.lease_request_id() != q.lease_request_id()) continue;
      auto pending = std::move(*it);
      leases.erase(it);
      rpc::RequestWorkerLeaseReply canceled;
      canceled.set_canceled(true);
      pending.callback(absl::OkStatus(), std::move(canceled));
      reply.set_success(true);
      break;
    }
    cb(absl::OkStatus(), std::move(reply));
  }
  void NotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest&,
                           Callback<rpc::NotifyWorkerBlockedReply> cb) override {
    cb(absl::OkStatus(), {});
  }
  void HealthCheck(Callback<rpc::HealthCheckReply> cb) override { cb(absl::OkStatus(), {}); }
  void PinObjectIDs(const rpc::PinObjectIDsRequest&, Callback<rpc::PinObjectIDsReply> cb) override {
    cb(absl::OkStatus(), {});
  }
  void FreeObjects(const rpc::FreeObjectsRequest& q, Callback<rpc::FreeObjectsReply> cb) override {
    frees.push_back(q);
    cb(absl::OkStatus(), {});
  }
  // Fetches are recorded; answered at once (OK, nothing failed) unless `hold_fetches`,
  // when they wait in `fetches` for ReplyFetch.
  void FetchObjects(const rpc::FetchObjectsRequest& q, int64_t, Callback<rpc::FetchObjectsReply> cb) override {
    fetch_requests.push_back(q);
    if (!hold_fetches) return cb(absl::OkStatus(), {});
    fetches.push_back({q, std::move(cb)});
  }
  // Answers the oldest held fetch; false when none is held.
  bool ReplyFetch(const absl::Status& status = absl::OkStatus(), rpc::FetchObjectsReply reply = {}) {
    if (fetches.empty()) return false;
    auto p = std::move(fetches.front());
    fetches.pop_front();
    p.callback(status, std::move(reply));
    return true;
  }
  // Bundle calls are recorded and answered at once: prepares with `prepare_success`
  // (or `prepare_status` when not OK), commits with `commit_status`.
  void PrepareBundleResources(const rpc::PrepareBundleResourcesRequest& q,
                              Callback<rpc::PrepareBundleResourcesReply> cb) override {
    prepares.push_back(q);
    rpc::PrepareBundleResourcesReply reply;
    reply.set_success(prepare_success);
    cb(prepare_status, std::move(reply));
  }
  void CommitBundleResources(const rpc::CommitBundleResourcesRequest& q,
                             Callback<rpc::CommitBundleResourcesReply> cb) override {
    commits.push_back(q);
    cb(commit_status, {});
  }
  void CancelResourceReserve(const rpc::CancelResourceReserveRequest& q,
                             Callback<rpc::CancelResourceReserveReply> cb) override {
    bundle_cancels.push_back(q);
    cb(absl::OkStatus(), {});
  }
  void ReleaseUnusedBundles(const rpc::ReleaseUnusedBundlesRequest& q,
                            Callback<rpc::ReleaseUnusedBundlesReply> cb) override {
    releases.push_back(q);
    cb(absl::OkStatus(), {});
  }
  void CancelAll() override {
    auto pending = std::move(leases);
    leases.clear();
    for (auto& p : pending) p.callback(absl::CancelledError("cancelled"), {});
  }
  int64_t InFlight() const override { return static_cast<int64_t>(leases.size()); }

  // Grants the oldest pending lease request with a worker whose task channel listens
  // on `worker_port` (its gRPC port is worker_port + 10000). Returns the reply sent.
  rpc::RequestWorkerLeaseReply Grant(int worker_port, const WorkerID& worker_id = WorkerID::FromRandom()) {
    rpc::RequestWorkerLeaseReply reply;
    if (leases.empty()) return reply;
    auto p = std::move(leases.front());
    leases.pop_front();
    reply.mutable_worker_address()->set_ip_address("127.0.0.1");
    reply.mutable_worker_address()->set_port(worker_port + 10000);
    reply.mutable_worker_address()->set_task_port(worker_port);
    reply.mutable_worker_address()->set_worker_id(worker_id.Binary());
    reply.mutable_worker_address()->set_node_id(node_id.Binary());
    reply.set_lease_id(LeaseID::FromRandom().Binary());
    reply.set_worker_pid(worker_port);
    p.callback(absl::OkStatus(), rpc::RequestWorkerLeaseReply(reply));
    return reply;
  }
  // Spills the oldest pending request back to the raylet at ip:port (node `node_id`).
  void SpillTo(const std::string& ip, int port, const NodeID& node_id = NodeID::FromRandom()) {
    rpc::RequestWorkerLeaseReply reply;
    reply.mutable_retry_at_raylet_address()->set_ip_address(ip);
    reply.mutable_retry_at_raylet_address()->set_port(port);
    reply.mutable_retry_at_raylet_address()->set_node_id(node_id.Binary());
    AnswerOldest(std::move(reply));
  }
  // Rejects the oldest pending request with `message` (as a raylet does when no
  // worker can be started for its runtime env, with `runtime_env_setup_failed`, or
  // when its placement group was removed, with `placement_group_removed`).
  void Reject(const std::string& message, bool runtime_env_setup_failed = false,
              bool placement_group_removed = false) {
    rpc::RequestWorkerLeaseReply reply;
    reply.set_rejected(true);
    reply.set_failure_message(message);
    reply.set_runtime_env_setup_failed(runtime_env_setup_failed);
    reply.set_placement_group_removed(placement_group_removed);
    AnswerOldest(std::move(reply));
  }
  // Sends the oldest pending (spilled-back) request back to be placed again from its
  // owner's raylet, as a raylet does when it waited there and another node has room.
  void PlaceAgain() {
    rpc::RequestWorkerLeaseReply reply;
    reply.set_rejected(true);
    reply.set_place_again(true);
    reply.set_failure_message("another node can run it now");
    AnswerOldest(std::move(reply));
  }
  // Answers the oldest pending lease request with `reply` (none pending: nothing).
  void AnswerOldest(rpc::RequestWorkerLeaseReply reply) {
    if (leases.empty()) return;
    auto p = std::move(leases.front());
    leases.pop_front();
    p.callback(absl::OkStatus(), std::move(reply));
  }

  std::deque<Pending<rpc::RequestWorkerLeaseRequest, rpc::RequestWorkerLeaseReply>> leases;
  std::vector<rpc::ReturnWorkerRequest> returns;
  std::vector<rpc::CancelWorkerLeaseRequest> cancels;
  std::vector<rpc::PrepareBundleResourcesRequest> prepares;
  std::vector<rpc::CommitBundleResourcesRequest> commits;
  std::vector<rpc::CancelResourceReserveRequest> bundle_cancels;
  std::vector<rpc::ReleaseUnusedBundlesRequest> releases;
  std::vector<rpc::FreeObjectsRequest> frees;
  std::vector<rpc::FetchObjectsRequest> fetch_requests;  // every fetch, held or not
  std::deque<Pending<rpc::FetchObjectsRequest, rpc::FetchObjectsReply>> fetches;  // held ones
  bool hold_fetches = false;
  bool prepare_success = true;
  absl::Status prepare_status;
  absl::Status commit_status;
  // The node of the workers it grants.
  NodeID node_id = NodeID::FromRandom();

 private:
  std::string address_;
};

}  // namespace manta::raylet
