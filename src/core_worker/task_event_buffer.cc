#include "src/core_worker/task_event_buffer.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "src/common/task_event_util.h"

namespace manta::core {

namespace {

constexpr int StateIndex(rpc::TaskStatus status) { return static_cast<int>(status) - 1; }

bool ValidState(rpc::TaskStatus status) {
  return status >= rpc::PENDING_ARGS_AVAIL && status <= rpc::FAILED;
}

// PackedTask::event_state_.
constexpr uint8_t kNotReported = 0, kReported = 1, kEnded = 2;

// Each kind's first attempts in a batch (per lane) are written whatever the rate.
constexpr int32_t kDetailedPerKind = 4;

// A lane holds fewer rows than this.
constexpr int64_t kMaxLaneRows = (int64_t{1} << 28) - 2;

// Rows a lane reserves room for at its first (a few seconds' worth at the default
// detail rate, a busy second's at 10,000 a second): address space, its pages touched
// only as rows are written, so the rows of a busy second are not copied and faulted
// in again at each doubling.
constexpr int64_t kFirstLaneRows = 16384;

std::string_view IdBytes(const TaskID& id) { return {reinterpret_cast<const char*>(id.Data()), TaskID::kSize}; }

// A thread's last few kinds, per buffer (by serial).
struct KindCache {
  static constexpr int kSize = 4;
  uint64_t buffer = 0;
  std::array<const rpc::TaskKind*, kSize> kinds{};
  std::array<int32_t, kSize> numbers{};
  int next = 0;
};
thread_local KindCache kind_cache;

std::atomic<uint64_t> next_serial{1};

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

void SentStamps::Finish(std::vector<std::function<void()>>* later) {
  if (reported_.empty()) return;
  later->push_back([events = events_, reported = std::move(reported_), at_us = at_us_] {
    events->ReachedAll(reported, rpc::SUBMITTED_TO_WORKER, at_us);
  });
}

TaskEventBuffer::TaskEventBuffer(TaskEventSource source, int64_t max_rows)
    : source_(std::move(source)),
      max_rows_(std::clamp<int64_t>(max_rows, 1, kMaxLaneRows)),
      quota_chunk_(std::clamp<int64_t>(max_rows_ / (4 * kLanes), 1, 256)),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      rows_free_(max_rows_),
      keep_rows_(2 * max_rows_) {}

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
  LockLanes();
  detail_per_s_ = std::max<int64_t>(per_s, 0);
  short_us_ = short_us;
  UnlockLanes();
  absl::MutexLock lock(&mu_);
  detail_tokens_ = static_cast<double>(detail_per_s_);  // a short program keeps up to a second's worth
  detail_refilled_us_ = UnixMicros();
}

bool TaskEventBuffer::TakeToken(Lane& lane, int64_t now_us) {
  if (now_us < lane.no_token_until_us) return false;
  absl::MutexLock lock(&mu_);
  const auto per_s = static_cast<double>(detail_per_s_);
  // (Threads' clocks are read at different moments: time never runs back here.)
  const int64_t elapsed_us = std::max<int64_t>(now_us - detail_refilled_us_, 0);
  detail_tokens_ = std::min(per_s, detail_tokens_ + static_cast<double>(elapsed_us) * 1e-6 * per_s);
  detail_refilled_us_ += elapsed_us;
  if (detail_tokens_ >= 1) {
    detail_tokens_ -= 1;
    return true;
  }
  // No lock again until the next token is due.
  lane.no_token_until_us = now_us + static_cast<int64_t>((1 - detail_tokens_) * 1e6 / per_s);
  return false;
}

bool TaskEventBuffer::CountInstead(Lane& lane, const PackedTask& packed, const rpc::TaskResult& result,
                                   bool reported, int64_t now_us) {
  constexpr auto relaxed = std::memory_order_relaxed;
  // Only an attempt with no other row anywhere: not reported in flight, and too
  // short for its worker to have reported it running.
  if (detail_per_s_ == 0 || reported || packed.event_submitted_us_.load(relaxed) == 0 ||
      result.start_unix_us() <= 0 || result.run_us() >= short_us_) {
    return false;
  }
  const int32_t number = packed.event_kind_.load(relaxed);
  if (number < 0) return false;
  const auto kind = static_cast<size_t>(BatchKind(lane, number));
  Records& r = lane.records;
  if (r.summarized.size() <= kind) {
    r.summarized.resize(kind + 1, 0);
    r.detailed.resize(kind + 1, 0);
  }
  bool keep = TakeToken(lane, now_us);
  if (r.detailed[kind] < kDetailedPerKind) {  // a rare function always shows
    ++r.detailed[kind];
    keep = true;
  }
  // (A full buffer counts it rather than drop it.)
  if (keep && (lane.quota > 0 || TakeQuota(lane))) return false;
  ++r.summarized[kind];
  return true;
}

int32_t TaskEventBuffer::NumberKind(const rpc::TaskSpec& spec) {
  KindCache& cache = kind_cache;
  if (cache.buffer != serial_) cache = KindCache{serial_};
  for (int i = 0; i < KindCache::kSize; ++i) {
    if (cache.kinds[i] != nullptr && SameTaskKind(*cache.kinds[i], spec)) return cache.numbers[i];
  }
  const size_t hash = TaskKindHash(spec);
  absl::MutexLock lock(&kinds_mu_);
  int32_t number = -1;
  auto it = kinds_by_hash_.find(hash);
  if (it != kinds_by_hash_.end()) {
    for (int32_t n : it->second) {
      if (SameTaskKind(kinds_[n], spec)) number = n;
    }
  }
  if (number < 0) {
    if (static_cast<int32_t>(kinds_.size()) >= kMaxKinds) return -1;
    kinds_.push_back(TaskKindOf(spec));
    number = static_cast<int32_t>(kinds_.size()) - 1;
    kinds_by_hash_[hash].push_back(number);
  }
  cache.kinds[cache.next] = &kinds_[number];
  cache.numbers[cache.next] = number;
  cache.next = (cache.next + 1) % KindCache::kSize;
  return number;
}

void TaskEventBuffer::NoteKind(const rpc::TaskSpec& spec, const PackedTask& packed) {
  if (packed.event_kind_.load(std::memory_order_relaxed) < 0) {
    packed.event_kind_.store(NumberKind(spec), std::memory_order_relaxed);
  }
}

bool TaskEventBuffer::TakeQuota(Lane& lane) {
  int64_t free = rows_free_.load(std::memory_order_relaxed);
  int64_t take = 0;
  do {
    take = std::min(quota_chunk_, free);
    if (take == 0) return false;
  } while (!rows_free_.compare_exchange_weak(free, free - take, std::memory_order_relaxed));
  lane.quota = take;
  // Half full (many attempts reported in flight, or ends on many threads) is early too.
  const int64_t half = max_rows_ / 2, used = max_rows_ - free;
  if (used < half && used + take >= half && early_report_) early_report_();
  return true;
}

TaskEventBuffer::Row* TaskEventBuffer::NewRow(Lane& lane, std::string_view task_id, int attempt, bool capped) {
  Records& r = lane.records;
  if (capped && lane.quota == 0 && !TakeQuota(lane)) {
    ++lane.dropped;
    return nullptr;
  }
  if (static_cast<int64_t>(r.rows.size()) >= kMaxLaneRows) {
    ++lane.dropped;
    return nullptr;
  }
  if (capped) --lane.quota;
  if (r.rows.capacity() == 0) r.rows.reserve(static_cast<size_t>(std::min(max_rows_, kFirstLaneRows)));
  Row& row = r.rows.emplace_back();
  std::memcpy(row.task_id.data(), task_id.data(), std::min(task_id.size(), row.task_id.size()));
  row.attempt = attempt;
  return &row;
}

int32_t TaskEventBuffer::BatchKind(Lane& lane, int32_t number) {
  if (static_cast<size_t>(number) >= lane.batch_kind.size()) lane.batch_kind.resize(number + 1, -1);
  int32_t& index = lane.batch_kind[number];
  if (index < 0) {
    index = static_cast<int32_t>(lane.records.kinds.size());
    lane.batch_kinds_set.push_back(number);
    absl::MutexLock lock(&kinds_mu_);
    lane.records.kinds.push_back(kinds_[number]);
  }
  return index;
}

int32_t TaskEventBuffer::KindOf(Lane& lane, const rpc::TaskSpec& spec) {
  const int32_t number = NumberKind(spec);
  if (number >= 0) return BatchKind(lane, number);
  // Beyond the kinds numbered: described per batch.
  std::vector<rpc::TaskKind>& kinds = lane.records.kinds;
  auto [it, added] = lane.described.try_emplace(TaskKindHash(spec), static_cast<int32_t>(kinds.size()));
  if (!added && SameTaskKind(kinds[it->second], spec)) return it->second;
  kinds.push_back(TaskKindOf(spec));  // new, or another kind with the same hash (described again)
  return static_cast<int32_t>(kinds.size()) - 1;
}

TaskEventBuffer::Row* TaskEventBuffer::RowWithStamps(Lane& lane, const PackedTask& packed, bool reported) {
  Row* row = NewRow(lane, IdBytes(packed.task_id()), packed.attempt_number(), !reported);
  if (row == nullptr) return nullptr;
  row->state_us[StateIndex(rpc::PENDING_ARGS_AVAIL)] = packed.event_submitted_us_.load(std::memory_order_relaxed);
  row->state_us[StateIndex(rpc::PENDING_NODE_ASSIGNMENT)] =
      packed.event_dispatched_us_.load(std::memory_order_relaxed);
  row->state_us[StateIndex(rpc::SUBMITTED_TO_WORKER)] = packed.event_sent_us_.load(std::memory_order_relaxed);
  if (reported) return row;  // the GCS has its kind
  const int32_t number = packed.event_kind_.load(std::memory_order_relaxed);
  // (No number: its submission was not recorded, or its kind is beyond those numbered.)
  row->kind = number >= 0 ? BatchKind(lane, number) : KindOf(lane, packed.Unpack());
  const std::string_view parent = packed.parent_task_id();
  if (parent.size() == TaskID::kSize) std::memcpy(row->parent_task_id.data(), parent.data(), TaskID::kSize);
  return row;
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
  NoteKind(spec, packed);
  packed.event_submitted_us_.store(submitted_us, std::memory_order_relaxed);
  ReportActorCreation(packed);
}

void TaskEventBuffer::Dispatched(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us) {
  NoteKind(spec, packed);
  packed.event_submitted_us_.store(submitted_us, std::memory_order_relaxed);
  if (Stamp(packed, rpc::PENDING_NODE_ASSIGNMENT, submitted_us)) {
    AddStateRow(packed, rpc::PENDING_NODE_ASSIGNMENT, submitted_us);
  }
  ReportActorCreation(packed);
}

void TaskEventBuffer::ReportActorCreation(const PackedTask& packed) {
  // Not in the task manager's table (ReportInFlight): reported as it goes.
  if (packed.type() == rpc::ACTOR_CREATION_TASK) InFlight(packed);
}

bool TaskEventBuffer::Stamp(const PackedTask& packed, rpc::TaskStatus status, int64_t at_us) {
  switch (status) {
    case rpc::PENDING_NODE_ASSIGNMENT:
      packed.event_dispatched_us_.store(at_us, std::memory_order_relaxed);
      return Reported(packed);
    case rpc::SUBMITTED_TO_WORKER:
      packed.event_sent_us_.store(at_us, std::memory_order_relaxed);
      return Reported(packed);
    default:  // not kept in the PackedTask
      return true;
  }
}

void TaskEventBuffer::AddStateRow(const PackedTask& packed, rpc::TaskStatus status, int64_t at_us) {
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (Row* row = NewRow(lane, IdBytes(packed.task_id()), packed.attempt_number(), !Reported(packed))) {
    row->state_us[StateIndex(status)] = at_us;
  }
}

void TaskEventBuffer::Reached(const PackedTask& packed, rpc::TaskStatus status) {
  if (!ValidState(status)) return;
  const int64_t now = UnixMicros();
  if (Stamp(packed, status, now)) AddStateRow(packed, status, now);  // else in its row at its end
}

void TaskEventBuffer::Reached(const TaskID& task_id, int attempt, rpc::TaskStatus status) {
  if (!ValidState(status)) return;
  const int64_t now = UnixMicros();
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (Row* row = NewRow(lane, IdBytes(task_id), attempt, true)) row->state_us[StateIndex(status)] = now;
}

void TaskEventBuffer::ReachedAll(const std::vector<PackedTaskPtr>& tasks, rpc::TaskStatus status, int64_t at_us) {
  if (!ValidState(status)) return;
  for (const PackedTaskPtr& task : tasks) {
    if (Stamp(*task, status, at_us)) AddStateRow(*task, status, at_us);  // (rare: reported in flight)
  }
}

bool TaskEventBuffer::Sent(const PackedTask& packed, int64_t at_us) {
  return Stamp(packed, rpc::SUBMITTED_TO_WORKER, at_us);
}

bool TaskEventBuffer::Reported(const PackedTask& packed) {
  return packed.event_state_.load(std::memory_order_relaxed) == kReported;
}

void TaskEventBuffer::Moved(const PackedTask& from, const PackedTask& to) {
  constexpr auto relaxed = std::memory_order_relaxed;
  to.event_submitted_us_.store(from.event_submitted_us_.load(relaxed), relaxed);
  to.event_dispatched_us_.store(from.event_dispatched_us_.load(relaxed), relaxed);
  to.event_sent_us_.store(from.event_sent_us_.load(relaxed), relaxed);
  to.event_kind_.store(from.event_kind_.load(relaxed), relaxed);
  to.event_state_.store(from.event_state_.load(relaxed), relaxed);
}

void TaskEventBuffer::Ended(const PackedTask& packed, const rpc::TaskResult& result, const TaskExecutorInfo& by,
                            const rpc::ErrorInfo* error, int64_t now) {
  // (An attempt being reported in flight on another thread meanwhile: its end is a
  // row after that one, or that one is not written.)
  const bool reported = packed.event_state_.exchange(kEnded, std::memory_order_relaxed) == kReported;
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (error == nullptr && CountInstead(lane, packed, result, reported, now)) return;
  Row* row = RowWithStamps(lane, packed, reported);
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
  const bool reported = packed.event_state_.exchange(kEnded, std::memory_order_relaxed) == kReported;
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  Row* row = RowWithStamps(lane, packed, reported);
  if (row == nullptr) return;
  row->state_us[StateIndex(rpc::FAILED)] = now;
  AddError(lane, row, error);
  CountEnded(lane);
}

void TaskEventBuffer::Withdrawn(const PackedTask& packed) {
  if (packed.event_state_.exchange(kEnded, std::memory_order_relaxed) != kReported) return;
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (Row* row = NewRow(lane, IdBytes(packed.task_id()), packed.attempt_number(), false)) {
    row->flags = TaskEventRow::kWithdrawn;
  }
}

bool TaskEventBuffer::InFlight(const PackedTask& packed) {
  if (packed.event_submitted_us_.load(std::memory_order_relaxed) == 0) return false;  // not submitted yet
  uint8_t state = kNotReported;
  // Reported already, or ended (its end is its row): nothing to do.
  if (!packed.event_state_.compare_exchange_strong(state, kReported, std::memory_order_relaxed)) return true;
  Lane& lane = ThisThreadsLane();
  absl::MutexLock lock(&lane.mu);
  if (RowWithStamps(lane, packed, false) != nullptr) return true;
  state = kReported;  // full: not reported after all (unless it ended meanwhile)
  packed.event_state_.compare_exchange_strong(state, kNotReported, std::memory_order_relaxed);
  return false;
}

int64_t TaskEventBuffer::FreeRows() const { return rows_free_.load(std::memory_order_relaxed); }

thread_local TaskEventBuffer::SlotCache TaskEventBuffer::slot_cache_;

TaskEventBuffer::RunningSlot* TaskEventBuffer::ClaimSlot() {
  SlotCache& cache = slot_cache_;
  if (cache.buffer == serial_) {
    RunningSlot* last = cache.slot;
    if (!last->busy.exchange(true, std::memory_order_acquire)) return last;  // (nested: busy)
  }
  RunningSlot* slot = nullptr;
  {
    absl::MutexLock lock(&running_mu_);
    for (RunningSlot& s : running_) {
      if (!s.busy.exchange(true, std::memory_order_acquire)) {
        slot = &s;
        break;
      }
    }
    if (slot == nullptr) {
      slot = &running_.emplace_back();
      slot->busy.store(true, std::memory_order_relaxed);
    }
  }
  cache = SlotCache{serial_, slot};
  return slot;
}

void TaskEventBuffer::BeginRunning(const rpc::TaskSpec& spec, int64_t start_unix_us) {
  RunningSlot* slot = ClaimSlot();
  slot->start_us.store(start_unix_us, std::memory_order_relaxed);
  slot->reported.store(false, std::memory_order_relaxed);
  slot->spec.store(&spec, std::memory_order_release);
}

void TaskEventBuffer::EndRunning(const rpc::TaskSpec& spec) {
  RunningSlot* slot = nullptr;
  const SlotCache& cache = slot_cache_;
  if (cache.buffer == serial_ && cache.slot->spec.load(std::memory_order_relaxed) == &spec) {
    slot = cache.slot;
  } else {  // another thread's task, or one begun inside another
    absl::MutexLock lock(&running_mu_);
    for (RunningSlot& s : running_) {
      if (s.spec.load(std::memory_order_relaxed) != &spec) continue;
      slot = &s;
      break;
    }
  }
  if (slot == nullptr) return;
  slot->spec.store(nullptr, std::memory_order_seq_cst);
  while (slot->readers.load(std::memory_order_seq_cst) != 0) sched_yield();  // a report reads it (a few µs)
  slot->busy.store(false, std::memory_order_release);
}

bool TaskEventBuffer::AddRunningRow(Lane& lane, RunningSlot& slot, int64_t min_running_us, int64_t now) {
  const rpc::TaskSpec* spec = slot.spec.load(std::memory_order_seq_cst);
  if (spec == nullptr || slot.reported.load(std::memory_order_relaxed)) return true;
  const int64_t start_us = slot.start_us.load(std::memory_order_relaxed);
  if ((min_running_us > 0 && now - start_us < min_running_us) || spec->task_id().size() != TaskID::kSize) return true;
  Row* row = NewRow(lane, spec->task_id(), spec->attempt_number(), true);
  if (row == nullptr) return false;
  slot.reported.store(true, std::memory_order_relaxed);
  row->kind = KindOf(lane, *spec);
  if (spec->parent_task_id().size() == TaskID::kSize) {
    std::memcpy(row->parent_task_id.data(), spec->parent_task_id().data(), TaskID::kSize);
  }
  row->state_us[StateIndex(rpc::RUNNING)] = start_us;
  row->exec_start_us = start_us;
  row->executor = ExecutorOf(lane, source_.self);
  return true;
}

void TaskEventBuffer::AddRunning(Lane& lane, int64_t min_running_us) {
  const int64_t now = min_running_us > 0 ? UnixMicros() : 0;
  absl::MutexLock lock(&running_mu_);
  for (RunningSlot& slot : running_) {
    if (!slot.busy.load(std::memory_order_acquire)) continue;
    slot.readers.fetch_add(1, std::memory_order_seq_cst);
    const bool room = AddRunningRow(lane, slot, min_running_us, now);
    slot.readers.fetch_sub(1, std::memory_order_release);
    if (!room) return;
  }
}

bool TaskEventBuffer::TakeLanes(int64_t min_running_us, std::array<Records, kLanes>* taken, int64_t* dropped) {
  LockLanes();
  AddRunning(lanes_[0], min_running_us);
  bool any = false;
  for (Lane& lane : lanes_) any |= !lane.records.rows.empty() || !lane.records.summarized.empty() || lane.dropped > 0;
  if (any) {
    for (int l = 0; l < kLanes; ++l) {
      Lane& lane = lanes_[l];
      // The next batch's records go to the spare ones (their memory kept from before).
      std::swap((*taken)[l], lane.records);
      std::swap(lane.records, lane.spare);
      for (int32_t number : lane.batch_kinds_set) lane.batch_kind[number] = -1;
      lane.batch_kinds_set.clear();
      lane.described.clear();
      lane.last_executor = -1;
      lane.quota = 0;
      lane.ended = 0;
      *dropped += lane.dropped;
      lane.dropped = 0;
    }
    rows_free_.store(max_rows_, std::memory_order_relaxed);
  }
  UnlockLanes();
  return any;
}

void TaskEventBuffer::KeepMemory(std::array<Records, kLanes>* taken) {
  for (int l = 0; l < kLanes; ++l) {
    Records& r = (*taken)[l];
    r.rows.clear();
    r.kinds.clear();
    r.executors.clear();
    r.errors.clear();
    r.summarized.clear();
    r.detailed.clear();
    Lane& lane = lanes_[l];
    absl::MutexLock lock(&lane.mu);
    const size_t keep = static_cast<size_t>(keep_rows_.load(std::memory_order_relaxed));
    if (r.rows.capacity() <= keep && lane.spare.rows.capacity() < r.rows.capacity()) {
      std::swap(lane.spare, r);
    }
  }
}

void TaskEventBuffer::JoinLanes(std::array<Records, kLanes>* taken, rpc::TaskEventBatch* batch,
                                std::vector<Row>* rows, int* sent_lane) {
  int lanes_with_rows = 0;
  size_t total = 0;
  for (int l = 0; l < kLanes; ++l) {
    Records& r = (*taken)[l];
    if (r.rows.empty() && r.summarized.empty()) continue;
    // Kinds, executors and errors are numbered per lane: renumbered for the batch.
    const int32_t kinds = batch->kinds_size(), executors = batch->executors_size();
    for (size_t k = 0; k < r.summarized.size(); ++k) {
      if (r.summarized[k] == 0) continue;
      rpc::TaskKindCount* c = batch->add_summarized();
      c->set_kind(kinds + static_cast<int32_t>(k));
      c->set_finished(r.summarized[k]);
    }
    for (rpc::TaskKind& k : r.kinds) *batch->add_kinds() = std::move(k);
    if (r.rows.empty()) continue;
    ++lanes_with_rows;
    *sent_lane = l;
    const auto first_row = static_cast<int32_t>(total);
    total += r.rows.size();
    for (rpc::TaskExecutor& e : r.executors) *batch->add_executors() = std::move(e);
    for (rpc::TaskEventError& e : r.errors) {
      e.set_row(e.row() + first_row);
      *batch->add_errors() = std::move(e);
    }
    if (kinds == 0 && executors == 0) continue;
    for (Row& row : r.rows) {
      if (row.kind >= 0) row.kind += kinds;
      if (row.executor >= 0) row.executor += executors;
    }
  }
  rows->clear();
  if (lanes_with_rows == 0) return;
  if (lanes_with_rows == 1) {  // one thread recorded: no copy
    rows->swap((*taken)[*sent_lane].rows);
    return;
  }
  *sent_lane = -1;
  rows->reserve(total);
  for (const Records& r : *taken) rows->insert(rows->end(), r.rows.begin(), r.rows.end());
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
