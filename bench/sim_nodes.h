// SimNodes: many simulated raylets in one process, for bench/cluster_sim.
//
// Each simulated node speaks the raylet's protocol to a real GCS with the real client
// code: its own gcs::GrpcGcsClient (its own connection), registration, a read of
// the node table, a gcs::GcsSubscriber on the raylet's five channels, a changed
// availability reported every `report_ms`; and it answers what the GCS asks a
// raylet (health checks; bundle prepare, commit, cancel and release, against its
// "sim" resource) on its own listening port. It starts no workers and holds no
// objects: its resources are named sim_* so that no task or actor is placed on it.
//
// One gRPC server serves every node: one thread accepts on all their listening
// sockets and hands each connection to the server (AddInsecureChannelFromFd); a
// call finds its node by its connection's peer name. Killing a node closes its
// socket and connections and stops its polls and reports, as a machine that dies.
//
// Node state lives on one EventLoop thread; the public methods block the caller.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/send_reply.h"
#include "src/gcs/gcs_client.h"
#include "src/gcs/gcs_subscriber.h"

namespace grpc {
class Server;
}

namespace manta::bench {

class SimNodes {
 public:
  struct Options {
    std::string gcs_address;
    int64_t report_ms = 1000;
    // Units of the "sim" resource each node has for placement-group bundles.
    double sim_units = 4;
  };

  explicit SimNodes(Options options);
  ~SimNodes();
  SimNodes(const SimNodes&) = delete;
  SimNodes& operator=(const SimNodes&) = delete;

  // Adds nodes until `n` have started; returns when every one has registered, read
  // the node table and had its first poll answered.
  absl::Status GrowTo(int n, int64_t timeout_ms);
  // Registers one more node; each node already up records when the GCS's news of it
  // reached it. The milliseconds from the registration call to each arrival, sorted
  // (those that did not arrive within `timeout_ms` are left out).
  std::vector<double> FanOutOfNewNode(int64_t timeout_ms);
  // Kills a node; milliseconds until the first and until the last node still up
  // heard it was DEAD.
  absl::StatusOr<std::pair<double, double>> TimeToNoticeDeath(int64_t timeout_ms);
  // Pubsub messages the nodes received so far.
  int64_t MessagesReceived() const { return messages_.load(); }
  // Calls that failed (registration, reports), so far.
  int64_t Failures() const { return failures_.load(); }
  // Nodes the GCS declared DEAD while they were up: this process fell behind the
  // health checks (a check unanswered within health_check_timeout_ms, as many times
  // running as health_check_failure_threshold), as a raylet whose loop stalls would.
  int64_t DeclaredDeadWhileUp() const { return declared_dead_.load(); }
  int size() const;

 private:
  struct Node;
  class Service;

  // A listening socket for the next node; its port.
  absl::StatusOr<int> AddListener();
  // Loop thread: the next node, listening on `port`; its index.
  int AddNode(int port);
  void StartNode(int index);
  void OnRegistered(int index);
  void OnMessage(int index, const rpc::PubMessage& m);
  void Report(int index);
  rpc::NodeInfo MakeInfo(const Node& node) const;
  void Kill(int index);
  // Calls on the gRPC server's threads: the node their connection belongs to.
  int NodeOfPeer(const std::string& peer);
  void AcceptLoop();
  void AcceptOn(int index);

  // Handlers (loop thread), for Service.
  void HealthCheck(int index, rpc::HealthCheckReply* reply, rpc::SendReply send);
  void Prepare(int index, const rpc::PrepareBundleResourcesRequest& q, rpc::PrepareBundleResourcesReply* r,
               rpc::SendReply send);
  void Cancel(int index, const rpc::Bundle& bundle, rpc::SendReply send);
  void ReleaseUnused(int index, const rpc::ReleaseUnusedBundlesRequest& q, rpc::SendReply send);

  // Runs `fn` on the loop and waits for it.
  void OnLoop(std::function<void()> fn);
  // Waits until `done` (run on the loop) is true, up to `timeout_ms`.
  bool WaitFor(const std::function<bool()>& done, int64_t timeout_ms);

  Options options_;
  rpc::ClientOptions client_options_;
  EventLoop loop_;
  std::thread loop_thread_;
  std::vector<std::unique_ptr<Node>> nodes_;  // loop thread
  absl::flat_hash_map<std::string, int> index_of_;  // node id (binary) -> index; loop thread
  std::atomic<int64_t> messages_{0};
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> declared_dead_{0};

  // Events being timed (loop thread).
  std::string watched_id_;
  bool watch_dead_ = false;
  int64_t watch_start_ns_ = 0;
  std::vector<double> arrivals_ms_;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread accept_thread_;
  // Listening sockets and connections, by node; connection peer name -> node.
  mutable absl::Mutex mu_;
  std::vector<int> listen_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int>> conns_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> peers_ ABSL_GUARDED_BY(mu_);
};

// CPU time and resident memory of a process, from /proc.
struct ProcUsage {
  double cpu_s = 0;
  double rss_mb = 0;
};
ProcUsage ReadProcUsage(pid_t pid);

}  // namespace manta::bench
