#include "src/core_worker/driver_output.h"

#include <glog/logging.h>

#include <iostream>

#include "absl/time/clock.h"
#include "src/common/loop_call.h"
#include "src/common/node_address.h"

namespace manta::core {

DriverOutput::DriverOutput(EventLoop& loop, gcs::GcsClientInterface& gcs, const JobID& job_id,
                           const WorkerID& driver_id, const Config& config)
    : loop_(loop),
      gcs_(gcs),
      job_id_(job_id),
      flush_prefix_(driver_id.Hex()),
      timeout_ms_(config.log_to_driver_flush_timeout_ms),
      client_options_(rpc::ClientOptionsFromConfig(config, nullptr)) {
  client_options_.deadline_ms = timeout_ms_;
}

void DriverOutput::Followed(bool ok) {
  absl::MutexLock lock(&mu_);
  followed_ = ok ? 1 : -1;
}

void DriverOutput::OnBatch(const rpc::WorkerLogBatch& batch) {
  if (batch.job_id() != job_id_.Binary()) return;
  if (!batch.flush_id().empty()) {
    absl::MutexLock lock(&mu_);
    awaited_.erase(batch.flush_id());
    return;
  }
  const std::string prefix = "(pid=" + std::to_string(batch.pid()) + ", ip=" + batch.node_ip() + ") ";
  std::string out;
  for (const std::string& line : batch.lines()) out += prefix + line + "\n";
  // What a worker printed on stdout goes to ours, its stderr to ours (as Ray does).
  std::ostream& stream = batch.is_err() ? std::cerr : std::cout;
  stream << out << std::flush;
}

bool DriverOutput::Flushed() const { return asked_ && awaited_.empty(); }

void DriverOutput::Flush() {
  if (timeout_ms_ <= 0) return;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms_);
  {
    // A driver that ends at once: the marks would miss a subscription not yet taken.
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(+[](int* followed) { return *followed != 0; }, &followed_), deadline);
    if (followed_ <= 0) return;
  }
  loop_.Post("DriverOutput.Flush", [this] {
    gcs_.AsyncGetAllNodeInfo([this](const absl::Status& s, rpc::GetAllNodeInfoReply&& reply) {
      Asks asks;
      for (const rpc::NodeInfo& node : reply.node_info_list()) {
        if (!s.ok() || node.state() != rpc::NodeInfo::ALIVE) continue;
        asks.emplace_back(RayletAddress(node), flush_prefix_ + "/" + BinaryHex(node.node_id()));
      }
      absl::MutexLock lock(&mu_);
      if (closed_) return;  // too late: the driver went on
      for (const auto& ask : asks) awaited_.insert(ask.second);
      asked_ = true;
      Ask(asks);
    });
  });
  std::vector<std::shared_ptr<rpc::GrpcClient<rpc::LogService>>> clients;
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(this, &DriverOutput::Flushed), deadline)) {
      VLOG(1) << "workers' last output: " << awaited_.size() << " node(s) did not answer within " << timeout_ms_
              << " ms";
    }
    closed_ = true;
    clients.swap(clients_);
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

void DriverOutput::Ask(const Asks& asks) {
  for (const auto& [address, flush_id] : asks) {
    auto raylet = std::make_shared<rpc::GrpcClient<rpc::LogService>>(loop_, address, client_options_);
    clients_.push_back(raylet);
    rpc::FlushWorkerLogsRequest request;
    request.set_job_id(job_id_.Binary());
    request.set_flush_id(flush_id);
    // (Its callback runs on the loop, never inline: the lock held here is free then.)
    raylet->Call(&rpc::LogService::Stub::async::FlushWorkerLogs, "Log.FlushWorkerLogs", std::move(request),
                 rpc::GrpcClient<rpc::LogService>::Callback<rpc::FlushWorkerLogsReply>(
                     [this, flush_id = flush_id](const absl::Status& s, rpc::FlushWorkerLogsReply&& reply) {
                       if (s.ok() && reply.marks()) return;  // the mark is on its way
                       if (!s.ok()) VLOG(1) << "workers' last output: " << s;
                       absl::MutexLock lock(&mu_);
                       awaited_.erase(flush_id);
                     }));
  }
}

}  // namespace manta::core
