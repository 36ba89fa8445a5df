// TaskEventReporter: sends the task event buffer's batches to the GCS — every
// task_events_report_ms, sooner once the buffer holds task_events_early_report_rows
// attempts, and a last time at exit (ARCHITECTURE.md §18). One batch is in flight at
// a time; meanwhile the buffer fills, and drops beyond its cap. Nothing on the task
// path waits for any of this.
//
// Loop thread, except buffer(), which any thread records into.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/core_worker/task_event_buffer.h"
#include "src/gcs/gcs_client.h"

namespace manta::core {

class TaskEventReporter {
 public:
  TaskEventReporter(EventLoop& loop, gcs::GcsClientInterface& gcs, TaskEventSource source, const Config& config);
  ~TaskEventReporter();

  TaskEventBuffer& buffer() { return buffer_; }
  // Sends what the buffer holds now, every running task included (even while a batch
  // is in flight), and runs `done`
  // once the GCS answered, or at once when there was nothing. Loop thread.
  void Flush(std::function<void()> done);
  // `report(all)` gives the attempts still in flight their rows before each periodic
  // batch (all: false) and before the last (all: true): TaskManager::ReportInFlight.
  // Set before the first task. Loop thread.
  void SetInFlight(std::function<void(bool all)> report) { in_flight_report_ = std::move(report); }
  // Stops the timer: nothing more is sent but by Flush. Loop thread.
  void Stop();
  // A driver's own task (DRIVER_TASK `task_id` of `job_id`, named `name`) runs from now on.
  void BeginDriverTask(const TaskID& task_id, const JobID& job_id, const std::string& name);
  // At exit: stops the timer, ends the driver's task (if any) and sends the last batch;
  // `done` as for Flush. Loop thread.
  void FinishAndFlush(std::function<void()> done);
  int64_t batches_sent() const { return batches_sent_; }

 private:
  // Sends a batch unless one is in flight (`periodic`: the timer's, with the
  // attempts in flight).
  void Report(bool periodic);
  void Send(rpc::TaskEventBatch batch, std::function<void()> done);

  EventLoop& loop_;
  gcs::GcsClientInterface& gcs_;
  TaskEventBuffer buffer_;
  // A driver's own task, RUNNING while the driver runs (empty for workers).
  rpc::TaskSpec driver_task_;
  // Periodic reports show a task RUNNING once it has run this long (half a period).
  const int64_t min_running_us_;
  std::function<void(bool all)> in_flight_report_;
  std::unique_ptr<Timer> timer_;
  bool in_flight_ = false;
  int64_t batches_sent_ = 0;
  // An early report was posted and has not run yet.
  std::atomic<bool> early_posted_{false};
  // Posted work and replies check it: the reporter may be gone when they run.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::core
