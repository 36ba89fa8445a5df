#include "src/gcs/gcs_worker_manager.h"

#include <glog/logging.h>

#include "src/common/id.h"

namespace manta::gcs {

void GcsWorkerManager::HandleReportWorkerFailure(const rpc::ReportWorkerFailureRequest& request,
                                                 rpc::ReportWorkerFailureReply*, rpc::SendReply send_reply) {
  const rpc::WorkerDeltaData& failure = request.worker_failure();
  auto worker = WorkerID::FromBinaryChecked(failure.worker_id());
  if (!worker.ok()) return std::move(send_reply)(absl::InvalidArgumentError("ReportWorkerFailure: bad worker_id"));
  auto node = NodeID::FromBinaryChecked(failure.node_id());
  if (!node.ok()) return std::move(send_reply)(absl::InvalidArgumentError("ReportWorkerFailure: bad node_id"));
  auto job = JobID::FromBinaryChecked(failure.job_id());
  if (!job.ok()) return std::move(send_reply)(absl::InvalidArgumentError("ReportWorkerFailure: bad job_id"));
  VLOG(1) << (failure.is_driver() ? "driver " : "worker ") << worker->Hex() << " on node " << node->Hex()
          << " (job " << job->Hex() << ") exited: " << failure.exit_reason();
  rpc::PubMessage message;
  message.set_channel_type(rpc::GCS_WORKER_DELTA_CHANNEL);
  message.set_key_id(failure.worker_id());
  *message.mutable_worker_delta_message() = failure;
  publisher_.Publish(std::move(message));
  for (const DeathListener& listener : listeners_) listener(failure);
  std::move(send_reply)(absl::OkStatus());
}

void GcsWorkerManager::HandleReportWorkerLogs(const rpc::ReportWorkerLogsRequest& request,
                                              rpc::ReportWorkerLogsReply*, rpc::SendReply send_reply) {
  for (const rpc::WorkerLogBatch& batch : request.batches()) {
    if (!JobID::FromBinaryChecked(batch.job_id()).ok()) {
      return std::move(send_reply)(absl::InvalidArgumentError("ReportWorkerLogs: bad job_id"));
    }
  }
  for (const rpc::WorkerLogBatch& batch : request.batches()) {
    rpc::PubMessage message;
    message.set_channel_type(rpc::WORKER_LOG_CHANNEL);
    message.set_key_id(batch.job_id());
    *message.mutable_worker_log_message() = batch;
    publisher_.Publish(std::move(message));
  }
  std::move(send_reply)(absl::OkStatus());
}

}  // namespace manta::gcs
