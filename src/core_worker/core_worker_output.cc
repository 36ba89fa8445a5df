// What a driver's workers print, on the driver's terminal (ARCHITECTURE.md §18).
//
// Each raylet reads its workers' output files every log_to_driver_period_ms and
// sends the new lines to the GCS, which publishes them to the job's driver
// (WORKER_LOG_CHANNEL), where they are printed on stderr with where they ran. A
// line printed just before the driver exits would miss it, so a driver shutting down
// asks every live raylet for a round at once (LogService.FlushWorkerLogs): each ends
// it with a batch marked with the driver's flush id, on the same channel, after the
// lines. The driver waits, at most log_to_driver_flush_timeout_ms, until every mark
// it was promised arrived.
#include <glog/logging.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "src/common/loop_call.h"

#include "protos/node_manager.grpc.pb.h"
#include "src/common/rpc/grpc_client.h"
#include "src/core_worker/core_worker.h"
#include "src/gcs/gcs_client.h"

namespace manta::core {

void CoreWorker::OnWorkerOutput(const rpc::WorkerLogBatch& batch) {
  if (batch.job_id() != options_.job_id.Binary()) return;
  if (!batch.flush_id().empty()) {
    absl::MutexLock lock(&output_mu_);
    awaited_flushes_.erase(batch.flush_id());
    return;
  }
  const std::string prefix = "(pid=" + std::to_string(batch.pid()) + ", ip=" + batch.node_ip() + ") ";
  std::string out;
  for (const std::string& line : batch.lines()) out += prefix + line + "\n";
  std::cerr << out << std::flush;
}

bool CoreWorker::WorkerOutputFlushed() const { return flush_asked_ && awaited_flushes_.empty(); }

void CoreWorker::FlushWorkerOutput() {
  const int64_t timeout_ms = options_.config.log_to_driver_flush_timeout_ms;
  if (!options_.is_driver || !options_.log_to_driver || options_.job_id.IsNil() || timeout_ms <= 0) return;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  {
    // A driver that ends at once: the marks would miss a subscription not yet taken.
    absl::MutexLock lock(&output_mu_);
    output_mu_.AwaitWithDeadline(absl::Condition(
                                     +[](int* followed) { return *followed != 0; }, &worker_output_followed_),
                                 deadline);
    if (worker_output_followed_ <= 0) return;
  }
  loop_.Post("CoreWorker.FlushWorkerOutput", [this, timeout_ms] {
    gcs_.AsyncGetAllNodeInfo([this, timeout_ms](const absl::Status& s, rpc::GetAllNodeInfoReply&& reply) {
      std::vector<std::pair<std::string, std::string>> asks;  // (raylet address, flush id)
      for (const rpc::NodeInfo& node : reply.node_info_list()) {
        if (!s.ok() || node.state() != rpc::NodeInfo::ALIVE) continue;
        asks.emplace_back(node.node_manager_address() + ":" + std::to_string(node.node_manager_port()),
                          self_.worker_id.Hex() + "/" + BinaryHex(node.node_id()));
      }
      absl::MutexLock lock(&output_mu_);
      if (flush_closed_) return;  // too late: the driver went on
      for (const auto& ask : asks) awaited_flushes_.insert(ask.second);
      flush_asked_ = true;
      AskForWorkerOutput(asks, timeout_ms);
    });
  });
  std::vector<std::shared_ptr<rpc::GrpcClient<rpc::LogService>>> clients;
  {
    absl::MutexLock lock(&output_mu_);
    if (!output_mu_.AwaitWithDeadline(absl::Condition(this, &CoreWorker::WorkerOutputFlushed), deadline)) {
      VLOG(1) << "workers' last output: " << awaited_flushes_.size() << " node(s) did not answer within "
              << timeout_ms << " ms";
    }
    flush_closed_ = true;
    clients.swap(flush_clients_);
  }
  // No call may outlive the loop (its callback is posted there): cancel what is left
  // (it ends at once) and wait for the callbacks.
  for (auto& client : clients) client->CancelAll();
  DrainCallbacks(
      loop_,
      [&clients] {
        int64_t n = 0;
        for (const auto& client : clients) n += client->InFlight();
        return n;
      },
      1000);
}

void CoreWorker::AskForWorkerOutput(const std::vector<std::pair<std::string, std::string>>& asks,
                                    int64_t timeout_ms) {
  rpc::ClientOptions client_options = rpc::ClientOptionsFromConfig(options_.config, nullptr);
  client_options.deadline_ms = timeout_ms;
  for (const auto& [address, flush_id] : asks) {
    auto raylet = std::make_shared<rpc::GrpcClient<rpc::LogService>>(loop_, address, client_options);
    flush_clients_.push_back(raylet);
    rpc::FlushWorkerLogsRequest request;
    request.set_job_id(options_.job_id.Binary());
    request.set_flush_id(flush_id);
    // (Its callback runs on the loop, never inline: the lock held here is free then.)
    raylet->Call(&rpc::LogService::Stub::async::FlushWorkerLogs, "Log.FlushWorkerLogs", std::move(request),
                 rpc::GrpcClient<rpc::LogService>::Callback<rpc::FlushWorkerLogsReply>(
                     [this, flush_id = flush_id](const absl::Status& s, rpc::FlushWorkerLogsReply&& reply) {
                       if (s.ok() && reply.marks()) return;  // the mark is on its way
                       if (!s.ok()) VLOG(1) << "workers' last output: " << s;
                       absl::MutexLock lock(&output_mu_);
                       awaited_flushes_.erase(flush_id);
                     }));
  }
}

}  // namespace manta::core
