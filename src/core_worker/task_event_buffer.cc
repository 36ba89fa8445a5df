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

// A PackedTask's slot: (generation << 32 | lane << kLaneShift | index + 1); 0 is none.
constexpr int kLaneShift = 28;
constexpr int64_t kMaxLaneRows = (int64_t{1} << kLaneShift) - 2;
constexpr int kMaxChain = 64;  // rows of one attempt in one batch: a few per state at most

uint32_t SlotGeneration(uint64_t slot) { return static_cast<uint32_t>(slot >> 32); }
int SlotLane(uint64_t slot) { return static_cast<int>((slot >> kLaneShift) & 0xF); }
size_t SlotIndex(uint64_t slot) { return static_cast<size_t>(slot & ((uint64_t{1} << kLaneShift) - 1)) - 1; }
uint64_t MakeSlot(uint32_t generation, int lane, size_t index) {
  return (uint64_t{generation} << 32) | (static_cast<uint64_t>(lane) << kLaneShift) | (index + 1);
}

std::string_view IdBytes(const TaskID& id) { return {reinterpret_cast<const char*>(id.Data()), TaskID::kSize}; }

// Joins `from`, a later row of the same attempt, into `to`.
void JoinRow(const TaskEventRow& from, TaskEventRow* to) {
  for (size_t s = 0; s < to->state_us.size(); ++s) to->state_us[s] = std::max(to->state_us[s], from.state_us[s]);
  if (from.exec_start_us != 0) to->exec_start_us = from.exec_start_us;
  if (from.exec_end_us != 0) to->exec_end_us = from.exec_end_us;
  if (from.executor >= 0) to->executor = from.executor;
  if (to->kind < 0 && from.kind >= 0) {
    to->kind = from.kind;
    to->parent_task_id = from.parent_task_id;
  }
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

void RecordSent(TaskEventBuffer* events, std::vector<PackedTaskPtr> sent, std::vector<std::function<void()>>* later) {
  if (sent.empty()) return;
  later->push_back([events, sent = std::move(sent), at_us = UnixMicros()] {
    events->ReachedAll(sent, rpc::SUBMITTED_TO_WORKER, at_us);
  });
}

TaskEventBuffer::TaskEventBuffer(TaskEventSource source, int64_t max_rows)
    : source_(std::move(source)),
      max_rows_(std::clamp<int64_t>(max_rows, 1, kMaxLaneRows)),
      quota_chunk_(std::clamp<int64_t>(max_rows_ / (4 * kLanes), 1, 256)),
      rows_free_(max_rows_),
      keep_rows_(2 * max_rows_) {
  for (int i = 0; i < kLanes; ++i) lanes_[i].index = i;
}

TaskEventBuffer::Lane& TaskEventBuffer::ThisThreadsLane() {
  static std::atomic<int> next{0};
  thread_local const int lane = next.fetch_add(1, std::memory_order_relaxed) % kLanes;
  return lanes_[lane];
}

void TaskEventBuffer::LockLanes() const {
  for (Lane& lane : lanes_) lane.mu.Lock();
}

void TaskEventBuffer::UnlockLanes() const {
  for (Lane& lane : lanes_) lane.mu.Unlock();
}

void TaskEventBuffer::SetEarlyReport(int64_t rows, std::function<void()> report) {
  LockLanes();
  early_rows_ = rows;
  keep_rows_.store(2 * (rows > 0 ? rows : max_rows_), std::memory_order_relaxed);
  early_report_.swap(report);
  UnlockLanes();
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

bool TaskEventBuffer::TakeQuota(Lane& lane) {
  int64_t free = rows_free_.load(std::memory_order_relaxed);
  int64_t take = 0;
  do {
    take = std::min(quota_chunk_, free);
    if (take == 0) return false;
  } while (!rows_free_.compare_exchange_weak(free, free - take, std::memory_order_relaxed));
  lane.quota = take;
  // Half full (mostly attempts still going: a burst of submissions) is early too.
  const int64_t half = max_rows_ / 2, used = max_rows_ - free;
  if (used < half && used + take >= half && early_report_) early_report_();
  return true;
}

TaskEventBuffer::Row* TaskEventBuffer::AddRow(Lane& lane, std::string_view task_id, int attempt,
                                              uint64_t continues) {
  Records& r = lane.records;
  if (static_cast<int64_t>(r.rows.size()) >= kMaxLaneRows) {
    ++lane.dropped;
    return nullptr;
  }
  Row& row = r.rows.emplace_back();
  r.continues.push_back(continues);
  std::memcpy(row.task_id.data(), task_id.data(), std::min(task_id.size(), row.task_id.size()));
  row.attempt = attempt;
  return &row;
}

TaskEventBuffer::Row* TaskEventBuffer::NewRow(Lane& lane, std::string_view task_id, int attempt) {
  if (lane.quota == 0 && !TakeQuota(lane)) {
    ++lane.dropped;
    return nullptr;
  }
  --lane.quota;
  return AddRow(lane, task_id, attempt, 0);
}

TaskEventBuffer::Row* TaskEventBuffer::RowOf(Lane& lane, const PackedTask& packed) {
  const uint64_t slot = packed.event_slot_.load(std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed);
  const std::string_view task_id = IdBytes(packed.task_id());
  Row* row = nullptr;
  if (slot != 0 && SlotGeneration(slot) == generation) {
    if (SlotLane(slot) != lane.index) {
      // Recorded on another thread before: this row continues that one (joined at TakeBatch).
      row = AddRow(lane, task_id, packed.attempt_number(), slot);
    } else if (SlotIndex(slot) < lane.records.rows.size()) {
      return &lane.records.rows[SlotIndex(slot)];
    }
  }
  if (row == nullptr) row = NewRow(lane, task_id, packed.attempt_number());
  if (row != nullptr) {
    packed.event_slot_.store(MakeSlot(generation, lane.index, lane.records.rows.size() - 1),
                             std::memory_order_relaxed);
  }
  return row;
}

int32_t TaskEventBuffer::KindOf(Lane& lane, const rpc::TaskSpec& spec) {
  std::vector<rpc::TaskKind>& kinds = lane.records.kinds;
  if (lane.last_kind >= 0 && SameTaskKind(kinds[lane.last_kind], spec)) return lane.last_kind;
  const size_t hash = TaskKindHash(spec);
  auto [it, added] = lane.kind_index.try_emplace(hash, static_cast<int32_t>(kinds.size()));
  if (!added && SameTaskKind(kinds[it->second], spec)) return lane.last_kind = it->second;
  // New, or another kind with the same hash (described again, uncached).
  kinds.push_back(TaskKindOf(spec));
  return lane.last_kind = static_cast<int32_t>(kinds.size()) - 1;
}

void TaskEventBuffer::Describe(Lane& lane, Row* row, const rpc::TaskSpec& spec) {
  row->kind = KindOf(lane, spec);
  const std::string& parent = spec.parent_task_id();
  if (parent.size() == TaskID::kSize) std::memcpy(row->parent_task_id.data(), parent.data(), TaskID::kSize);
}

int32_t TaskEventBuffer::ExecutorOf(Lane& lane, const TaskExecutorInfo& by) {
  if (lane.last_executor >= 0 && lane.last_executor_id == by.worker_id) return lane.last_executor;
  std::vector<rpc::TaskExecutor>& executors = lane.records.executors;
  lane.last_executor = -1;
  for (size_t i = 0; i < executors.size() && lane.last_executor < 0; ++i) {
    if (executors[i].worker_id() == by.worker_id.Binary()) lane.last_executor = static_cast<int32_t>(i);
  }
  if (lane.last_executor < 0) {
    rpc::TaskExecutor& e = executors.emplace_back();
    e.set_worker_id(by.worker_id.Binary());
    e.set_node_id(by.node_id.Binary());
    e.set_pid(by.pid);
    lane.last_executor = static_cast<int32_t>(executors.size()) - 1;
  }
  lane.last_executor_id = by.worker_id;
  return lane.last_executor;
}

void TaskEventBuffer::AddError(Lane& lane, const Row* row, const rpc::ErrorInfo& error) {
  rpc::TaskEventError& e = lane.records.errors.emplace_back();
  e.set_row(static_cast<int32_t>(row - lane.records.rows.data()));
  *e.mutable_error() = error;
}

void TaskEventBuffer::Submitted(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us) {
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  Row* row = RowOf(lane, packed);
  if (row == nullptr) return;
  Describe(lane, row, spec);
  row->state_us[StateIndex(rpc::PENDING_ARGS_AVAIL)] = submitted_us;
}

void TaskEventBuffer::Dispatched(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us) {
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  Row* row = RowOf(lane, packed);
  if (row == nullptr) return;
  Describe(lane, row, spec);
  row->state_us[StateIndex(rpc::PENDING_ARGS_AVAIL)] = submitted_us;
  row->state_us[StateIndex(rpc::PENDING_NODE_ASSIGNMENT)] = submitted_us;
}

void TaskEventBuffer::Reached(const PackedTask& packed, rpc::TaskStatus status) {
  if (!ValidState(status)) return;
  const int64_t now = UnixMicros();
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (Row* row = RowOf(lane, packed)) row->state_us[StateIndex(status)] = now;
}

void TaskEventBuffer::Reached(const TaskID& task_id, int attempt, rpc::TaskStatus status) {
  if (!ValidState(status)) return;
  const int64_t now = UnixMicros();
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (Row* row = NewRow(lane, IdBytes(task_id), attempt)) row->state_us[StateIndex(status)] = now;
}

void TaskEventBuffer::ReachedAll(const std::vector<PackedTaskPtr>& tasks, rpc::TaskStatus status, int64_t at_us) {
  if (tasks.empty() || !ValidState(status)) return;
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  for (const PackedTaskPtr& task : tasks) {
    if (Row* row = RowOf(lane, *task)) row->state_us[StateIndex(status)] = at_us;
  }
}

void TaskEventBuffer::Moved(const PackedTask& from, const PackedTask& to) {
  to.event_slot_.store(from.event_slot_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void TaskEventBuffer::Ended(const PackedTask& packed, const rpc::TaskResult& result, const TaskExecutorInfo& by,
                            const rpc::ErrorInfo* error, int64_t now) {
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  Row* row = RowOf(lane, packed);
  if (row == nullptr) return;
  row->state_us[StateIndex(error != nullptr ? rpc::FAILED : rpc::FINISHED)] = now;
  if (result.start_unix_us() > 0) {
    row->exec_start_us = result.start_unix_us();
    row->exec_end_us = result.start_unix_us() + std::max<int64_t>(result.run_us(), 0);
  }
  row->executor = ExecutorOf(lane, by);
  if (error != nullptr) AddError(lane, row, *error);
  CountEnded(lane);
}

void TaskEventBuffer::CountEnded(Lane& lane) {
  if (++lane.ended == early_rows_ && early_report_) early_report_();
}

void TaskEventBuffer::Failed(const PackedTask& packed, const rpc::ErrorInfo& error) {
  const int64_t now = UnixMicros();
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  Row* row = RowOf(lane, packed);
  if (row == nullptr) return;
  row->state_us[StateIndex(rpc::FAILED)] = now;
  AddError(lane, row, error);
  CountEnded(lane);
}

void TaskEventBuffer::BeginRunning(const rpc::TaskSpec& spec, int64_t start_unix_us) {
  absl::MutexLock lock(&running_mu_);
  running_.push_back(Running{&spec, start_unix_us, false});
}

void TaskEventBuffer::EndRunning(const rpc::TaskSpec& spec) {
  absl::MutexLock lock(&running_mu_);
  for (size_t i = 0; i < running_.size(); ++i) {
    if (running_[i].spec != &spec) continue;
    running_[i] = running_.back();
    running_.pop_back();
    return;
  }
}

void TaskEventBuffer::AddRunning(Lane& lane, int64_t min_running_us) {
  const int64_t now = min_running_us > 0 ? UnixMicros() : 0;
  absl::MutexLock lock(&running_mu_);
  for (Running& running : running_) {
    if (running.reported || (min_running_us > 0 && now - running.start_us < min_running_us)) continue;
    if (running.spec->task_id().size() != TaskID::kSize) continue;
    Row* row = NewRow(lane, running.spec->task_id(), running.spec->attempt_number());
    if (row == nullptr) return;
    running.reported = true;
    Describe(lane, row, *running.spec);
    row->state_us[StateIndex(rpc::RUNNING)] = running.start_us;
    row->exec_start_us = running.start_us;
    row->executor = ExecutorOf(lane, source_.self);
  }
}

bool TaskEventBuffer::TakeLanes(int64_t min_running_us, std::array<Records, kLanes>* taken, int64_t* dropped) {
  LockLanes();
  AddRunning(lanes_[0], min_running_us);
  bool any = false;
  for (Lane& lane : lanes_) any |= !lane.records.rows.empty() || lane.dropped > 0;
  if (any) {
    for (Lane& lane : lanes_) {
      // The next batch's records go to the spare ones (their memory kept from before).
      std::swap((*taken)[lane.index], lane.records);
      std::swap(lane.records, lane.spare);
      lane.kind_index.clear();
      lane.last_kind = -1;
      lane.last_executor = -1;
      lane.quota = 0;
      lane.ended = 0;
      *dropped += lane.dropped;
      lane.dropped = 0;
    }
    generation_.fetch_add(1, std::memory_order_relaxed);
    rows_free_.store(max_rows_, std::memory_order_relaxed);
  }
  UnlockLanes();
  return any;
}

void TaskEventBuffer::KeepMemory(std::array<Records, kLanes>* taken) {
  for (Lane& lane : lanes_) {
    Records& r = (*taken)[lane.index];
    r.rows.clear();
    r.continues.clear();
    r.kinds.clear();
    r.executors.clear();
    r.errors.clear();
    absl::MutexLock lock(&lane.mu);
    const size_t keep = static_cast<size_t>(keep_rows_.load(std::memory_order_relaxed));
    if (r.rows.capacity() <= keep && lane.spare.rows.capacity() < r.rows.capacity()) {
      std::swap(lane.spare, r);
    }
  }
}

int64_t TaskEventBuffer::DetailBudget(int64_t* short_us) {
  absl::MutexLock lock(&mu_);
  if (detail_per_s_ == 0) return -1;
  const int64_t now = UnixMicros();
  detail_tokens_ = std::min(static_cast<double>(detail_per_s_),
                            detail_tokens_ + static_cast<double>(now - detail_refilled_us_) * 1e-6 *
                                                 static_cast<double>(detail_per_s_));
  detail_refilled_us_ = now;
  *short_us = short_us_;
  return static_cast<int64_t>(detail_tokens_);
}

std::pair<int, size_t> TaskEventBuffer::FirstRowOf(const std::array<Records, kLanes>& taken, int lane,
                                                   size_t index) {
  for (int step = 0; step < kMaxChain; ++step) {
    const uint64_t slot = taken[lane].continues[index];
    if (slot == 0) return {lane, index};
    const int next_lane = SlotLane(slot);
    const size_t next_index = SlotIndex(slot);
    if (next_lane >= kLanes || next_index >= taken[next_lane].rows.size()) break;
    lane = next_lane;
    index = next_index;
  }
  return {-1, 0};
}

void TaskEventBuffer::JoinContinuing(std::array<Records, kLanes>* taken) {
  for (int l = 0; l < kLanes; ++l) {
    Records& r = (*taken)[l];
    for (size_t i = 0; i < r.rows.size(); ++i) {
      if (r.continues[i] == 0) continue;
      const auto [first_lane, first] = FirstRowOf(*taken, l, i);
      if (first_lane < 0) {
        r.continues[i] = 0;  // a broken chain (never made): the row stands alone
        continue;
      }
      JoinRow(r.rows[i], &(*taken)[first_lane].rows[first]);
      r.continues[i] = MakeSlot(0, first_lane, first);  // straight to it from now on
    }
  }
}

void TaskEventBuffer::JoinLanes(std::array<Records, kLanes>* taken, rpc::TaskEventBatch* batch,
                                std::vector<Row>* rows, int* sent_lane) {
  int lanes_with_rows = 0;
  size_t total = 0;
  bool errors = false;
  for (Records& r : *taken) {
    lanes_with_rows += r.rows.empty() ? 0 : 1;
    total += r.rows.size();
    errors |= !r.errors.empty();
    // Kinds and executors are numbered per lane: renumbered for the batch.
    const int32_t kinds = batch->kinds_size(), executors = batch->executors_size();
    for (rpc::TaskKind& k : r.kinds) *batch->add_kinds() = std::move(k);
    for (rpc::TaskExecutor& e : r.executors) *batch->add_executors() = std::move(e);
    if (kinds == 0 && executors == 0) continue;
    for (Row& row : r.rows) {
      if (row.kind >= 0) row.kind += kinds;
      if (row.executor >= 0) row.executor += executors;
    }
  }
  rows->clear();
  if (lanes_with_rows == 1) {  // one thread recorded: nothing to join, no copy
    for (int l = 0; l < kLanes; ++l) {
      if ((*taken)[l].rows.empty()) continue;
      rows->swap((*taken)[l].rows);
      *sent_lane = l;
      for (rpc::TaskEventError& e : (*taken)[l].errors) *batch->add_errors() = std::move(e);
    }
    return;
  }
  // An attempt recorded on several threads has a row in each of their lanes: one row.
  JoinContinuing(taken);
  rows->reserve(total);
  std::array<std::vector<int32_t>, kLanes> index_of;  // where each first row went (for errors)
  for (int l = 0; l < kLanes; ++l) {
    const Records& r = (*taken)[l];
    if (errors) index_of[l].assign(r.rows.size(), -1);
    for (size_t i = 0; i < r.rows.size(); ++i) {
      if (r.continues[i] != 0) continue;
      if (errors) index_of[l][i] = static_cast<int32_t>(rows->size());
      rows->push_back(r.rows[i]);
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    for (rpc::TaskEventError& e : (*taken)[l].errors) {
      const auto [first_lane, first] = FirstRowOf(*taken, l, static_cast<size_t>(e.row()));
      if (first_lane < 0) continue;
      e.set_row(index_of[first_lane][first]);
      *batch->add_errors() = std::move(e);
    }
  }
}

std::optional<rpc::TaskEventBatch> TaskEventBuffer::TakeBatch(int64_t min_running_us) {
  std::array<Records, kLanes> taken;
  int64_t dropped = 0;
  if (!TakeLanes(min_running_us, &taken, &dropped)) return std::nullopt;
  rpc::TaskEventBatch batch;
  int sent_lane = -1;
  std::vector<Row> rows;
  {
    absl::MutexLock lock(&mu_);
    rows.swap(spare_out_);
  }
  JoinLanes(&taken, &batch, &rows, &sent_lane);
  batch.set_dropped(dropped);
  int64_t short_us = 0;
  const int64_t budget = DetailBudget(&short_us);
  // Short attempts beyond the rate are counted; one copy of the rest.
  const int64_t detailed = budget >= 0 ? SummarizeBeyond(budget, short_us, &rows, &batch) : 0;
  batch.set_rows(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(Row));
  batch.set_job_id(source_.job_id.Binary());
  batch.set_worker_id(source_.self.worker_id.Binary());
  batch.set_node_id(source_.self.node_id.Binary());
  batch.set_pid(source_.self.pid);
  batch.set_is_driver(source_.is_driver);
  rows.clear();
  if (sent_lane >= 0) taken[sent_lane].rows.swap(rows);  // back to the lane whose rows went as they were
  {
    absl::MutexLock lock(&mu_);
    if (rows.capacity() <= static_cast<size_t>(keep_rows_.load(std::memory_order_relaxed))) spare_out_.swap(rows);
    detail_tokens_ = std::max(0.0, detail_tokens_ - static_cast<double>(detailed));
    total_dropped_ += dropped;
  }
  KeepMemory(&taken);
  return batch;
}

int64_t TaskEventBuffer::NumRows() const {
  int64_t n = 0;
  for (Lane& lane : lanes_) {
    absl::MutexLock lock(&lane.mu);
    n += static_cast<int64_t>(lane.records.rows.size());
  }
  return n;
}

int64_t TaskEventBuffer::TotalDropped() const {
  int64_t n = 0;
  for (Lane& lane : lanes_) {
    absl::MutexLock lock(&lane.mu);
    n += lane.dropped;
  }
  absl::MutexLock lock(&mu_);
  return n + total_dropped_;
}

}  // namespace manta::core
