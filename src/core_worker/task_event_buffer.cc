#include "src/core_worker/task_event_buffer.h"

#include <algorithm>
#include <cstring>

#include "src/common/task_event_util.h"

namespace manta::core {

namespace {

constexpr int StateIndex(rpc::TaskStatus status) { return static_cast<int>(status) - 1; }

bool ValidState(rpc::TaskStatus status) {
  return status >= rpc::PENDING_ARGS_AVAIL && status <= rpc::FAILED;
}

// Whether `row` may be counted instead of sent: it finished (not failed), holds its
// submission (so this is the attempt's first row from its owner) and ran under
// `short_us` (so no worker reported it running): no other row of it exists.
bool Summarizable(const TaskEventRow& row, int64_t short_us) {
  return row.kind >= 0 && row.StateUs(rpc::FINISHED) > 0 && row.StateUs(rpc::FAILED) == 0 &&
         row.StateUs(rpc::PENDING_ARGS_AVAIL) > 0 && row.exec_start_us > 0 &&
         row.exec_end_us - row.exec_start_us < short_us;
}

// How many of each kind's `counts` to keep within `budget`, shared fairly: kinds with
// fewer than their share keep all (a rare function always shows), the others split
// what is left equally.
std::vector<int64_t> FairShares(const std::vector<int64_t>& counts, int64_t budget) {
  std::vector<size_t> order(counts.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return counts[a] < counts[b]; });
  std::vector<int64_t> shares(counts.size(), 0);
  int64_t left = budget;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t share = left / static_cast<int64_t>(order.size() - i);
    shares[order[i]] = std::min(counts[order[i]], share);
    left -= shares[order[i]];
  }
  return shares;
}

// Keeps `budget` of the summarizable rows (a fair share per kind, each kind's spread
// evenly over the batch) and counts the others per kind in `batch`'s `summarized`,
// renumbering the errors' rows. Returns how many summarizable rows stay.
int64_t SummarizeBeyond(int64_t budget, int64_t short_us, std::vector<TaskEventRow>* rows,
                        rpc::TaskEventBatch* batch) {
  std::vector<int64_t> eligible(batch->kinds_size(), 0);
  int64_t total = 0;
  for (const TaskEventRow& row : *rows) {
    if (!Summarizable(row, short_us)) continue;
    ++eligible[row.kind];
    ++total;
  }
  if (total <= budget) return total;
  const std::vector<int64_t> keep = FairShares(eligible, budget);
  std::vector<int64_t> seen(eligible.size(), 0);
  std::vector<int32_t> new_index(batch->errors_size() > 0 ? rows->size() : 0, -1);
  size_t out = 0;
  for (size_t i = 0; i < rows->size(); ++i) {
    const TaskEventRow& row = (*rows)[i];
    if (Summarizable(row, short_us)) {
      const int64_t k = row.kind, j = seen[k]++;
      if ((j + 1) * keep[k] / eligible[k] == j * keep[k] / eligible[k]) continue;  // counted below
    }
    if (!new_index.empty()) new_index[i] = static_cast<int32_t>(out);
    if (out != i) (*rows)[out] = row;
    ++out;
  }
  rows->resize(out);
  for (rpc::TaskEventError& e : *batch->mutable_errors()) e.set_row(new_index[e.row()]);
  int64_t kept = 0;
  for (size_t k = 0; k < eligible.size(); ++k) {
    kept += keep[k];
    if (eligible[k] == keep[k]) continue;
    rpc::TaskKindCount* c = batch->add_summarized();
    c->set_kind(static_cast<int32_t>(k));
    c->set_finished(eligible[k] - keep[k]);
  }
  return kept;
}

}  // namespace

TaskExecutorInfo ExecutorOf(const rpc::Address& address) {
  TaskExecutorInfo info;
  if (auto id = WorkerID::FromBinaryChecked(address.worker_id()); id.ok()) info.worker_id = *id;
  if (auto id = NodeID::FromBinaryChecked(address.node_id()); id.ok()) info.node_id = *id;
  return info;
}

void RecordSubmitted(TaskEventBuffer* events, const rpc::TaskSpec& spec, const PackedTask& packed,
                     int64_t* submitted_us) {
  if (events == nullptr || *submitted_us == 0) return;
  events->Submitted(spec, packed, *submitted_us);
  *submitted_us = 0;
}

TaskEventBuffer::TaskEventBuffer(TaskEventSource source, int64_t max_rows)
    : source_(std::move(source)), max_rows_(std::max<int64_t>(max_rows, 1)) {}

void TaskEventBuffer::SetEarlyReport(int64_t rows, std::function<void()> report) {
  absl::MutexLock lock(&mu_);
  early_rows_ = rows;
  early_report_ = std::move(report);
}

void TaskEventBuffer::SetDetailRate(int64_t per_s, int64_t short_us) {
  absl::MutexLock lock(&mu_);
  detail_per_s_ = std::max<int64_t>(per_s, 0);
  short_us_ = short_us;
  detail_tokens_ = 0;  // a burst at start-up is held to the rate too (see FillDetailBucket)
  detail_refilled_us_ = UnixMicros();
}

void TaskEventBuffer::FillDetailBucket() {
  absl::MutexLock lock(&mu_);
  detail_tokens_ = static_cast<double>(detail_per_s_);
}

TaskEventBuffer::Row* TaskEventBuffer::NewRow(std::string_view task_id, int attempt) {
  if (static_cast<int64_t>(rows_.size()) >= max_rows_) {
    ++dropped_;
    return nullptr;
  }
  Row& row = rows_.emplace_back();
  // Half full (mostly attempts still going: a burst of submissions) is early too.
  if (static_cast<int64_t>(rows_.size()) == max_rows_ / 2 && early_report_) early_report_();
  std::memcpy(row.task_id.data(), task_id.data(), std::min(task_id.size(), row.task_id.size()));
  row.attempt = attempt;
  return &row;
}

TaskEventBuffer::Row* TaskEventBuffer::NewRow(const TaskID& task_id, int attempt) {
  return NewRow(std::string_view(reinterpret_cast<const char*>(task_id.Data()), TaskID::kSize), attempt);
}

TaskEventBuffer::Row* TaskEventBuffer::RowOf(const PackedTask& packed) {
  const uint64_t slot = packed.event_slot_;
  if (static_cast<uint32_t>(slot >> 32) == generation_) {
    const uint32_t index = static_cast<uint32_t>(slot) - 1;
    if (index < rows_.size()) return &rows_[index];
  }
  Row* row = NewRow(packed.task_id(), packed.attempt_number());
  if (row != nullptr) packed.event_slot_ = (uint64_t{generation_} << 32) | rows_.size();
  return row;
}

int32_t TaskEventBuffer::KindOf(const rpc::TaskSpec& spec) {
  if (last_kind_ >= 0 && SameTaskKind(kinds_[last_kind_], spec)) return last_kind_;
  const size_t hash = TaskKindHash(spec);
  auto [it, added] = kind_index_.try_emplace(hash, static_cast<int32_t>(kinds_.size()));
  if (!added && SameTaskKind(kinds_[it->second], spec)) return last_kind_ = it->second;
  // New, or another kind with the same hash (described again, uncached).
  kinds_.push_back(TaskKindOf(spec));
  return last_kind_ = static_cast<int32_t>(kinds_.size()) - 1;
}

void TaskEventBuffer::Describe(Row* row, const rpc::TaskSpec& spec) {
  row->kind = KindOf(spec);
  const std::string& parent = spec.parent_task_id();
  if (parent.size() == TaskID::kSize) std::memcpy(row->parent_task_id.data(), parent.data(), TaskID::kSize);
}

int32_t TaskEventBuffer::ExecutorOf(const TaskExecutorInfo& by) {
  if (last_executor_ >= 0 && last_executor_id_ == by.worker_id) return last_executor_;
  for (size_t i = 0; i < executors_.size(); ++i) {
    if (executors_[i].worker_id() == by.worker_id.Binary()) {
      last_executor_ = static_cast<int32_t>(i);
      last_executor_id_ = by.worker_id;
      return last_executor_;
    }
  }
  rpc::TaskExecutor& e = executors_.emplace_back();
  e.set_worker_id(by.worker_id.Binary());
  e.set_node_id(by.node_id.Binary());
  e.set_pid(by.pid);
  last_executor_ = static_cast<int32_t>(executors_.size()) - 1;
  last_executor_id_ = by.worker_id;
  return last_executor_;
}

void TaskEventBuffer::AddError(const Row* row, const rpc::ErrorInfo& error) {
  rpc::TaskEventError& e = errors_.emplace_back();
  e.set_row(static_cast<int32_t>(row - rows_.data()));
  *e.mutable_error() = error;
}

void TaskEventBuffer::Submitted(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us) {
  absl::MutexLock lock(&mu_);
  Row* row = RowOf(packed);
  if (row == nullptr) return;
  Describe(row, spec);
  row->state_us[StateIndex(rpc::PENDING_ARGS_AVAIL)] = submitted_us;
}

void TaskEventBuffer::Dispatched(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us) {
  const int64_t now = UnixMicros();
  absl::MutexLock lock(&mu_);
  Row* row = RowOf(packed);
  if (row == nullptr) return;
  Describe(row, spec);
  row->state_us[StateIndex(rpc::PENDING_ARGS_AVAIL)] = submitted_us;
  row->state_us[StateIndex(rpc::PENDING_NODE_ASSIGNMENT)] = now;
}

void TaskEventBuffer::Reached(const PackedTask& packed, rpc::TaskStatus status) {
  if (!ValidState(status)) return;
  const int64_t now = UnixMicros();
  absl::MutexLock lock(&mu_);
  if (Row* row = RowOf(packed)) row->state_us[StateIndex(status)] = now;
}

void TaskEventBuffer::Reached(const TaskID& task_id, int attempt, rpc::TaskStatus status) {
  if (!ValidState(status)) return;
  const int64_t now = UnixMicros();
  absl::MutexLock lock(&mu_);
  if (Row* row = NewRow(task_id, attempt)) row->state_us[StateIndex(status)] = now;
}

void TaskEventBuffer::ReachedAll(const std::vector<PackedTaskPtr>& tasks, rpc::TaskStatus status) {
  if (tasks.empty() || !ValidState(status)) return;
  const int64_t now = UnixMicros();
  absl::MutexLock lock(&mu_);
  for (const PackedTaskPtr& task : tasks) {
    if (Row* row = RowOf(*task)) row->state_us[StateIndex(status)] = now;
  }
}

void TaskEventBuffer::Moved(const PackedTask& from, const PackedTask& to) {
  absl::MutexLock lock(&mu_);
  to.event_slot_ = from.event_slot_;
}

void TaskEventBuffer::Ended(const PackedTask& packed, const rpc::TaskResult& result, const TaskExecutorInfo& by,
                            const rpc::ErrorInfo* error, int64_t now) {
  absl::MutexLock lock(&mu_);
  Row* row = RowOf(packed);
  if (row == nullptr) return;
  row->state_us[StateIndex(error != nullptr ? rpc::FAILED : rpc::FINISHED)] = now;
  if (result.start_unix_us() > 0) {
    row->exec_start_us = result.start_unix_us();
    row->exec_end_us = result.start_unix_us() + std::max<int64_t>(result.run_us(), 0);
  }
  row->executor = ExecutorOf(by);
  if (error != nullptr) AddError(row, *error);
  CountEndedLocked();
}

void TaskEventBuffer::CountEndedLocked() {
  if (++ended_ == early_rows_ && early_report_) early_report_();
}

void TaskEventBuffer::Failed(const PackedTask& packed, const rpc::ErrorInfo& error) {
  const int64_t now = UnixMicros();
  absl::MutexLock lock(&mu_);
  Row* row = RowOf(packed);
  if (row == nullptr) return;
  row->state_us[StateIndex(rpc::FAILED)] = now;
  AddError(row, error);
  CountEndedLocked();
}

void TaskEventBuffer::BeginRunning(const rpc::TaskSpec& spec, int64_t start_unix_us) {
  absl::MutexLock lock(&mu_);
  running_.push_back(Running{&spec, start_unix_us, false});
}

void TaskEventBuffer::EndRunning(const rpc::TaskSpec& spec) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < running_.size(); ++i) {
    if (running_[i].spec != &spec) continue;
    running_[i] = running_.back();
    running_.pop_back();
    return;
  }
}

void TaskEventBuffer::AddRunningLocked(int64_t min_running_us) {
  const int64_t now = min_running_us > 0 ? UnixMicros() : 0;
  for (Running& running : running_) {
    if (running.reported || (min_running_us > 0 && now - running.start_us < min_running_us)) continue;
    if (running.spec->task_id().size() != TaskID::kSize) continue;
    Row* row = NewRow(running.spec->task_id(), running.spec->attempt_number());
    if (row == nullptr) return;
    running.reported = true;
    Describe(row, *running.spec);
    row->state_us[StateIndex(rpc::RUNNING)] = running.start_us;
    row->exec_start_us = running.start_us;
    row->executor = ExecutorOf(source_.self);
  }
}

std::optional<rpc::TaskEventBatch> TaskEventBuffer::TakeBatch(int64_t min_running_us) {
  rpc::TaskEventBatch batch;
  std::vector<Row> rows;
  int64_t budget = -1;  // short attempts to keep detailed (-1: all)
  int64_t short_us = 0;
  int64_t detailed = 0;
  {
    absl::MutexLock lock(&mu_);
    AddRunningLocked(min_running_us);
    if (rows_.empty() && dropped_ == 0) return std::nullopt;
    // The next batch's rows go to the spare vector (its memory kept from before).
    rows.swap(rows_);
    rows_.swap(spare_rows_);
    batch.mutable_kinds()->Assign(std::make_move_iterator(kinds_.begin()), std::make_move_iterator(kinds_.end()));
    batch.mutable_executors()->Assign(std::make_move_iterator(executors_.begin()),
                                      std::make_move_iterator(executors_.end()));
    batch.mutable_errors()->Assign(std::make_move_iterator(errors_.begin()),
                                   std::make_move_iterator(errors_.end()));
    batch.set_dropped(dropped_);
    total_dropped_ += dropped_;
    dropped_ = 0;
    kinds_.clear();
    kind_index_.clear();
    last_kind_ = -1;
    executors_.clear();
    errors_.clear();
    last_executor_ = -1;
    ended_ = 0;
    ++generation_;
    if (detail_per_s_ > 0) {
      const int64_t now = UnixMicros();
      detail_tokens_ = std::min(static_cast<double>(detail_per_s_),
                                detail_tokens_ + static_cast<double>(now - detail_refilled_us_) * 1e-6 *
                                                     static_cast<double>(detail_per_s_));
      detail_refilled_us_ = now;
      budget = static_cast<int64_t>(detail_tokens_);
      short_us = short_us_;
    }
  }
  // Outside the lock: short attempts beyond the rate are counted; one copy of the rest.
  if (budget >= 0) detailed = SummarizeBeyond(budget, short_us, &rows, &batch);
  batch.set_rows(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(Row));
  batch.set_job_id(source_.job_id.Binary());
  batch.set_worker_id(source_.self.worker_id.Binary());
  batch.set_node_id(source_.self.node_id.Binary());
  batch.set_pid(source_.self.pid);
  batch.set_is_driver(source_.is_driver);
  // Their memory becomes the spare, up to twice an early report's worth (a burst
  // beyond it is freed).
  rows.clear();
  absl::MutexLock lock(&mu_);
  detail_tokens_ = std::max(0.0, detail_tokens_ - static_cast<double>(detailed));
  const int64_t keep = early_rows_ > 0 ? 2 * early_rows_ : max_rows_;
  if (rows.capacity() <= static_cast<size_t>(keep) && spare_rows_.capacity() < rows.capacity()) {
    spare_rows_.swap(rows);
  }
  return batch;
}

int64_t TaskEventBuffer::NumRows() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(rows_.size());
}

int64_t TaskEventBuffer::TotalDropped() const {
  absl::MutexLock lock(&mu_);
  return total_dropped_ + dropped_;
}

}  // namespace manta::core
