#include "src/gcs/gcs_job_manager.h"

#include <glog/logging.h>

#include "src/gcs/table_loader.h"

namespace manta::gcs {

GcsJobManager::GcsJobManager(StoreClientInterface& store, GcsPublisher& publisher,
                             std::function<int64_t()> now_ms)
    : store_(store), publisher_(publisher), now_ms_(std::move(now_ms)) {}

void GcsJobManager::Initialize(const absl::flat_hash_map<std::string, std::string>& rows) {
  jobs_ = ParseTableRows<JobID, rpc::JobInfo>(rows, kJobTable,
                                              [](const rpc::JobInfo& j) -> const std::string& { return j.job_id(); });
  for (const auto& [id, info] : jobs_) {
    if (!info.is_dead()) continue;
    for (const auto& listener : finished_listeners_) listener(id);
  }
  LOG(INFO) << "job table loaded: " << jobs_.size() << " jobs";
}

void GcsJobManager::HandleGetNextJobID(const rpc::GetNextJobIDRequest& request, rpc::GetNextJobIDReply* reply,
                                       rpc::SendReply send_reply) {
  store_.AsyncIncrement(kCounterTable, "job_id", 1,
                        [reply, send_reply = std::move(send_reply)](absl::StatusOr<int64_t> r) mutable {
                          if (!r.ok()) return std::move(send_reply)(r.status());
                          if (*r <= 0 || *r > 0xffffffffLL) {
                            return std::move(send_reply)(absl::ResourceExhaustedError("job ids exhausted"));
                          }
                          reply->set_job_id(JobID::FromInt(static_cast<uint32_t>(*r)).Binary());
                          std::move(send_reply)(absl::OkStatus());
                        });
}

void GcsJobManager::PersistAndPublish(const rpc::JobInfo& info, rpc::SendReply send_reply) {
  store_.AsyncPut(kJobTable, info.job_id(), info.SerializeAsString(), /*overwrite=*/true,
                  [this, info, send_reply = std::move(send_reply)](absl::StatusOr<bool> r) mutable {
                    if (r.ok()) {
                      rpc::PubMessage m;
                      m.set_channel_type(rpc::GCS_JOB_CHANNEL);
                      m.set_key_id(info.job_id());
                      *m.mutable_job_message() = info;
                      publisher_.Publish(std::move(m));
                    }
                    std::move(send_reply)(r.status());
                  });
}

void GcsJobManager::HandleAddJob(const rpc::AddJobRequest& request, rpc::AddJobReply* reply,
                                 rpc::SendReply send_reply) {
  auto id = JobID::FromBinaryChecked(request.job_info().job_id());
  if (!id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("AddJob: bad job_id"));
  rpc::JobInfo info = request.job_info();
  info.set_is_dead(false);
  if (info.start_time_ms() == 0) info.set_start_time_ms(now_ms_());
  jobs_[*id] = info;
  LOG(INFO) << "job " << id->ToInt() << " added (namespace '" << info.ray_namespace() << "')";
  PersistAndPublish(info, std::move(send_reply));
}

void GcsJobManager::HandleMarkJobFinished(const rpc::MarkJobFinishedRequest& request,
                                          rpc::MarkJobFinishedReply* reply, rpc::SendReply send_reply) {
  auto id = JobID::FromBinaryChecked(request.job_id());
  if (!id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("MarkJobFinished: bad job_id"));
  auto it = jobs_.find(*id);
  if (it == jobs_.end()) {
    return std::move(send_reply)(absl::NotFoundError("MarkJobFinished: unknown job " + std::to_string(id->ToInt())));
  }
  if (it->second.is_dead()) return std::move(send_reply)(absl::OkStatus());
  it->second.set_is_dead(true);
  it->second.set_end_time_ms(now_ms_());
  PersistAndPublish(it->second, std::move(send_reply));
  for (const auto& listener : finished_listeners_) listener(*id);
}

void GcsJobManager::HandleGetAllJobInfo(const rpc::GetAllJobInfoRequest& request, rpc::GetAllJobInfoReply* reply,
                                        rpc::SendReply send_reply) {
  std::vector<const rpc::JobInfo*> sorted;
  for (const auto& [id, info] : jobs_) sorted.push_back(&info);
  std::sort(sorted.begin(), sorted.end(),
            [](const rpc::JobInfo* a, const rpc::JobInfo* b) { return a->job_id() < b->job_id(); });
  for (const auto* info : sorted) *reply->add_job_info_list() = *info;
  std::move(send_reply)(absl::OkStatus());
}

}  // namespace manta::gcs
