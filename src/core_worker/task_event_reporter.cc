#include "src/core_worker/task_event_reporter.h"

#include <glog/logging.h>

namespace manta::core {

TaskEventReporter::TaskEventReporter(EventLoop& loop, gcs::GcsClientInterface& gcs, TaskEventSource source,
                                     const Config& config)
    : loop_(loop),
      gcs_(gcs),
      buffer_(std::move(source), config.task_events_max_buffer_rows),
      min_running_us_(std::max<int64_t>(config.task_events_report_ms, 1) * 1000 / 2) {
  buffer_.SetDetailRate(config.task_events_max_detailed_per_s, min_running_us_);
  std::weak_ptr<bool> alive = alive_;
  buffer_.SetEarlyReport(config.task_events_early_report_rows, [this, alive] {
    if (early_posted_.exchange(true)) return;
    loop_.Post("TaskEventReporter.EarlyReport", [this, alive] {
      if (alive.expired()) return;
      early_posted_ = false;
      Report(false);
    });
  });
  timer_ = loop_.RunEvery("TaskEventReporter.Report", std::max<int64_t>(config.task_events_report_ms, 1),
                          [this] { Report(true); });
}

TaskEventReporter::~TaskEventReporter() { buffer_.SetEarlyReport(0, nullptr); }

void TaskEventReporter::Stop() { timer_.reset(); }

void TaskEventReporter::BeginDriverTask(const TaskID& task_id, const JobID& job_id, const std::string& name) {
  driver_task_.set_type(rpc::DRIVER_TASK);
  driver_task_.set_task_id(task_id.Binary());
  driver_task_.set_job_id(job_id.Binary());
  driver_task_.set_function_name(name);
  buffer_.BeginRunning(driver_task_, UnixMicros());
}

void TaskEventReporter::FinishAndFlush(std::function<void()> done) {
  Stop();
  if (driver_task_.task_id().empty()) return Flush(std::move(done));
  const TaskID task_id = TaskID::FromBinary(driver_task_.task_id());
  buffer_.Reached(task_id, 0, rpc::FINISHED);
  // (The batch takes the driver's task while it still runs, if it was never reported.)
  Flush(std::move(done));
  buffer_.EndRunning(driver_task_);
}

void TaskEventReporter::Report(bool periodic) {
  if (in_flight_) return;
  if (periodic && in_flight_report_) in_flight_report_(false);
  std::optional<rpc::TaskEventBatch> batch = buffer_.TakeBatch(min_running_us_);
  if (!batch) return;
  in_flight_ = true;
  Send(std::move(*batch), [this] { in_flight_ = false; });
}

void TaskEventReporter::Flush(std::function<void()> done) {
  if (in_flight_report_) in_flight_report_(true);
  std::optional<rpc::TaskEventBatch> batch = buffer_.TakeBatch();
  if (!batch) return done();
  Send(std::move(*batch), std::move(done));
}

void TaskEventReporter::Send(rpc::TaskEventBatch batch, std::function<void()> done) {
  ++batches_sent_;
  std::weak_ptr<bool> alive = alive_;
  gcs_.AsyncAddTaskEventData(std::move(batch), [alive, done = std::move(done)](const absl::Status& s,
                                                                              rpc::AddTaskEventDataReply&&) {
    if (!s.ok()) VLOG(1) << "the GCS did not take a batch of task events: " << s;
    if (!alive.expired()) done();
  });
}

}  // namespace manta::core
