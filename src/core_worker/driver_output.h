// DriverOutput: what a driver's workers print, on the driver's terminal
// (ARCHITECTURE.md §18).
//
// Each raylet reads its workers' output files every log_to_driver_period_ms and
// sends the new lines to the GCS, which publishes them to the job's driver
// (WORKER_LOG_CHANNEL), where they are printed with where they ran: what a worker
// printed on stdout on the driver's stdout, its stderr on the driver's stderr. A
// line printed just before the driver exits would miss it, so a driver shutting down
// asks every live raylet for a round at once (LogService.FlushWorkerLogs): each ends
// it with a batch marked with the driver's flush id, on the same channel, after the
// job's lines. The driver waits, at most log_to_driver_flush_timeout_ms, until every
// mark it was promised arrived.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "protos/gcs.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_client.h"
#include "src/gcs/gcs_client.h"

namespace manta::core {

class DriverOutput {
 public:
  // For the driver `driver_id` of job `job_id`.
  DriverOutput(EventLoop& loop, gcs::GcsClientInterface& gcs, const JobID& job_id, const WorkerID& driver_id,
               const Config& config);

  // The driver's subscription to its workers' output was answered. Loop thread.
  void Followed(bool ok);
  // A batch published for the job: lines to print, or a raylet's mark. Loop thread.
  void OnBatch(const rpc::WorkerLogBatch& batch);
  // The driver is shutting down: waits (at most log_to_driver_flush_timeout_ms) until
  // every live raylet passed on what the job's workers printed before, then cancels
  // and drains its calls. User thread; once.
  void Flush();

 private:
  // (raylet address, flush id)
  using Asks = std::vector<std::pair<std::string, std::string>>;
  bool Flushed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks each raylet for its round and mark. Loop thread.
  void Ask(const Asks& asks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  EventLoop& loop_;
  gcs::GcsClientInterface& gcs_;
  const JobID job_id_;
  const std::string flush_prefix_;  // the driver's id, in hex
  const int64_t timeout_ms_;
  rpc::ClientOptions client_options_;
  absl::Mutex mu_;
  // The subscription: 0 not answered yet, 1 taken, -1 refused (then no mark can come).
  int followed_ ABSL_GUARDED_BY(mu_) = 0;
  // The marks not arrived yet, once the raylets were asked.
  absl::flat_hash_set<std::string> awaited_ ABSL_GUARDED_BY(mu_);
  bool asked_ ABSL_GUARDED_BY(mu_) = false;
  // The raylets asked, and whether it is too late to ask (the driver went on).
  std::vector<std::shared_ptr<rpc::GrpcClient<rpc::LogService>>> clients_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace manta::core
