#include "src/gcs/gcs_task_manager.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "src/common/task_event_row.h"
#include "src/common/task_event_util.h"
#include "src/common/status_util.h"
#include "src/common/util.h"

namespace manta::gcs {

namespace {


int64_t ErrorBytes(const rpc::ErrorInfo& e) {
  return static_cast<int64_t>(sizeof(rpc::ErrorInfo) + e.message().size() + e.exception_type().size());
}


std::string TaskTypeName(rpc::TaskType type) { return rpc::TaskType_Name(type); }

}  // namespace

const std::vector<std::string>& GcsTaskManager::FilterKeys() {
  static const std::vector<std::string> keys = {
      "task_id",   "attempt_number", "name",       "state",      "job_id",     "actor_id",
      "type",      "func_or_class_name", "parent_task_id", "node_id", "worker_id", "worker_pid",
      "error_type", "placement_group_id"};
  return keys;
}

void GcsTaskManager::HandleAddTaskEventData(const rpc::AddTaskEventDataRequest& request,
                                            rpc::AddTaskEventDataReply* reply, rpc::SendReply send_reply) {
  absl::Status s = AddBatch(request.batch());
  if (!s.ok()) LOG(WARNING) << "refusing a batch of task events: " << s.message();
  std::move(send_reply)(s);
}

absl::Status GcsTaskManager::Validate(const rpc::TaskEventBatch& b) {
  if (b.rows().size() % sizeof(TaskEventRow) != 0) {
    return absl::InvalidArgumentError("task event batch: its rows are " + std::to_string(b.rows().size()) +
                                      " bytes, not a multiple of " + std::to_string(sizeof(TaskEventRow)));
  }
  const int64_t n = NumRows(b);
  for (int64_t i = 0; i < n; ++i) {
    const TaskEventRow row = RowAt(b, i);
    if (row.kind >= b.kinds_size() || row.kind < -1) {
      return absl::InvalidArgumentError("task event batch: row " + std::to_string(i) + " names kind " +
                                        std::to_string(row.kind) + " of " + std::to_string(b.kinds_size()));
    }
    if (row.executor >= b.executors_size() || row.executor < -1) {
      return absl::InvalidArgumentError("task event batch: row " + std::to_string(i) + " names executor " +
                                        std::to_string(row.executor) + " of " +
                                        std::to_string(b.executors_size()));
    }
  }
  for (const rpc::TaskEventError& e : b.errors()) {
    if (e.row() < 0 || e.row() >= n) {
      return absl::InvalidArgumentError("task event batch: an error names row " + std::to_string(e.row()));
    }
  }
  for (const rpc::TaskKindCount& c : b.summarized()) {
    if (c.kind() < 0 || c.kind() >= b.kinds_size() || c.finished() < 0) {
      return absl::InvalidArgumentError("task event batch: a summary counts " + std::to_string(c.finished()) +
                                        " of kind " + std::to_string(c.kind()) + " of " +
                                        std::to_string(b.kinds_size()));
    }
  }
  if (!b.job_id().empty() && !JobID::FromBinaryChecked(b.job_id()).ok()) {
    return absl::InvalidArgumentError("task event batch: malformed job id");
  }
  return absl::OkStatus();
}

int32_t GcsTaskManager::InternKind(const rpc::TaskKind& kind) {
  std::string key = kind.SerializeAsString();
  auto it = kind_index_.find(key);
  if (it != kind_index_.end()) return it->second;
  // Bounded: a flood of distinct kinds leaves the later attempts undescribed.
  if (kinds_.size() >= 65536) return -1;
  kinds_.push_back(kind);
  bytes_ += static_cast<int64_t>(2 * key.size() + 64);
  kind_index_.emplace(std::move(key), static_cast<int32_t>(kinds_.size()) - 1);
  return static_cast<int32_t>(kinds_.size()) - 1;
}

int32_t GcsTaskManager::InternExecutor(const rpc::TaskExecutor& executor) {
  auto it = executor_index_.find(executor.worker_id());
  if (it != executor_index_.end()) {
    if (executor.pid() != 0) executors_[it->second].set_pid(executor.pid());
    return it->second;
  }
  if (executors_.size() >= (1u << 20)) return -1;
  executors_.push_back(executor);
  bytes_ += 160;
  executor_index_.emplace(executor.worker_id(), static_cast<int32_t>(executors_.size()) - 1);
  return static_cast<int32_t>(executors_.size()) - 1;
}

int32_t GcsTaskManager::InternJob(const std::string& job_id) {
  auto id = JobID::FromBinaryChecked(job_id);
  if (!id.ok()) return -1;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i] == *id) return static_cast<int32_t>(i);
  }
  jobs_.push_back(*id);
  return static_cast<int32_t>(jobs_.size()) - 1;
}

uint32_t GcsTaskManager::Find(const Key& key) {
  auto [it, inserted] = index_.try_emplace(key, kNone);
  if (!inserted) return it->second;
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  it->second = slot;
  slots_[slot].key = key;
  Link(slot, ListId::kActive);
  bytes_ += kAttemptBytes;
  if (key.attempt > 0) {
    // A retry reported without what it runs: the same as the attempt before.
    auto before = index_.find(Key{key.task_id, key.attempt - 1});
    if (before != index_.end()) {
      slots_[slot].attempt.kind = slots_[before->second].attempt.kind;
      slots_[slot].attempt.parent = slots_[before->second].attempt.parent;
    }
  }
  return slot;
}

void GcsTaskManager::Link(uint32_t slot, ListId id) {
  Chain& list = ListOf(id);
  Slot& s = slots_[slot];
  s.list = id;
  s.prev = list.tail;
  s.next = kNone;
  if (list.tail != kNone) slots_[list.tail].next = slot;
  list.tail = slot;
  if (list.head == kNone) list.head = slot;
}

void GcsTaskManager::Unlink(uint32_t slot) {
  Slot& s = slots_[slot];
  Chain& list = ListOf(s.list);
  if (s.prev != kNone) slots_[s.prev].next = s.next;
  if (s.next != kNone) slots_[s.next].prev = s.prev;
  if (list.head == slot) list.head = s.next;
  if (list.tail == slot) list.tail = s.prev;
  s.prev = s.next = kNone;
  s.list = ListId::kFree;
}

void GcsTaskManager::SetError(Attempt& a, const rpc::ErrorInfo& error) {
  if (a.error) bytes_ -= ErrorBytes(*a.error);
  a.error = std::make_unique<rpc::ErrorInfo>(error);
  // Bounded: a message longer than 4 KiB is cut.
  if (a.error->message().size() > 4096) a.error->mutable_message()->resize(4096);
  bytes_ += ErrorBytes(*a.error);
}

absl::Status GcsTaskManager::AddBatch(const rpc::TaskEventBatch& b) {
  MANTA_RETURN_IF_ERROR(Validate(b));
  dropped_at_source_ += std::max<int64_t>(b.dropped(), 0);
  const int32_t job = InternJob(b.job_id());
  // The reporter is the owner of the attempts it reports submitted.
  int32_t reporter = -2;
  std::vector<int32_t> kinds(b.kinds_size(), -2);
  std::vector<int32_t> executors(b.executors_size(), -2);
  // Each row's error, if it has one (the last given). Errors are set as their rows are
  // merged: a record's address changes when the table grows.
  std::vector<int> error_of(b.errors_size() > 0 ? NumRows(b) : 0, -1);
  for (int e = 0; e < b.errors_size(); ++e) error_of[b.errors(e).row()] = e;
  const int64_t n = NumRows(b);
  for (int64_t i = 0; i < n; ++i) {
    const TaskEventRow row = RowAt(b, i);
    if (Withdrawn(row)) continue;
    const uint32_t slot = Find(Key{row.TaskId(), row.attempt});
    Attempt& a = slots_[slot].attempt;
    const int32_t kind_before = a.kind;
    const rpc::TaskStatus state_before = StateOf(a);
    if (a.job < 0) a.job = job;
    if (row.kind >= 0) {
      if (kinds[row.kind] == -2) kinds[row.kind] = InternKind(b.kinds(row.kind));
      a.kind = kinds[row.kind];
      a.parent = row.ParentTaskId();
    }
    for (int s = 0; s < kNumStates; ++s) {
      if (row.state_us[s] > 0) a.state_us[s] = row.state_us[s];
    }
    if (row.exec_start_us > 0) a.exec_start_us = row.exec_start_us;
    if (row.exec_end_us > 0) a.exec_end_us = row.exec_end_us;
    if (row.StateUs(rpc::PENDING_ARGS_AVAIL) > 0 && !b.worker_id().empty()) {
      if (reporter == -2) {
        rpc::TaskExecutor self;
        self.set_worker_id(b.worker_id());
        self.set_node_id(b.node_id());
        self.set_pid(b.pid());
        reporter = InternExecutor(self);
      }
      a.owner = reporter;
    }
    if (row.executor >= 0) {
      if (executors[row.executor] == -2) executors[row.executor] = InternExecutor(b.executors(row.executor));
      a.executor = executors[row.executor];
    }
    if (!error_of.empty() && error_of[i] >= 0) SetError(a, b.errors(error_of[i]).error());
    const rpc::TaskStatus state = StateOf(a);
    if (state != state_before || a.kind != kind_before) {
      CountState(kind_before, state_before, -1);
      CountState(a.kind, state, +1);
    }
    if (slots_[slot].list == ListId::kActive && (state == rpc::FINISHED || state == rpc::FAILED)) {
      Unlink(slot);
      Link(slot, ListId::kTerminal);
    }
  }
  AddSummarized(b, &kinds);
  Evict();
  return absl::OkStatus();
}

bool GcsTaskManager::Withdrawn(const TaskEventRow& row) {
  if (!(row.flags & TaskEventRow::kWithdrawn)) return false;
  // Not a failure: the attempt never ran, and counts nowhere.
  if (auto it = index_.find(Key{row.TaskId(), row.attempt}); it != index_.end()) Erase(it->second);
  return true;
}

void GcsTaskManager::AddSummarized(const rpc::TaskEventBatch& b, std::vector<int32_t>* kinds) {
  for (const rpc::TaskKindCount& c : b.summarized()) {
    int32_t& kind = (*kinds)[c.kind()];
    if (kind == -2) kind = InternKind(b.kinds(c.kind()));
    CountState(kind, rpc::FINISHED, c.finished());
    summarized_ += c.finished();
  }
}

absl::StatusOr<rpc::TaskEventBatch> GcsTaskManager::Export(const std::string& job_id) const {
  int32_t job = -1;
  if (!job_id.empty()) {
    auto id = JobID::FromBinaryChecked(job_id);
    if (!id.ok()) return absl::InvalidArgumentError("malformed job id: expected 4 bytes");
    for (size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i] == *id) job = static_cast<int32_t>(i);
    }
    if (job < 0) return rpc::TaskEventBatch();  // no attempt of that job
  }
  rpc::TaskEventBatch out;
  std::vector<int32_t> kind_at(kinds_.size(), -1), executor_at(executors_.size(), -1);
  auto kind_of = [&](int32_t k) {
    if (k < 0) return -1;
    if (kind_at[k] < 0) {
      kind_at[k] = out.kinds_size();
      *out.add_kinds() = kinds_[k];
    }
    return kind_at[k];
  };
  auto executor_of = [&](int32_t e) {
    if (e < 0) return -1;
    if (executor_at[e] < 0) {
      executor_at[e] = out.executors_size();
      *out.add_executors() = executors_[e];
    }
    return executor_at[e];
  };
  for (const Slot& slot : slots_) {
    if (slot.list == ListId::kFree || (job >= 0 && slot.attempt.job != job)) continue;
    const Attempt& a = slot.attempt;
    const int row = static_cast<int>(NumRows(out));
    TaskEventRow r;
    r.SetTaskId(slot.key.task_id);
    r.attempt = slot.key.attempt;
    r.kind = kind_of(a.kind);
    if (a.kind >= 0) r.SetParentTaskId(a.parent);
    r.state_us = a.state_us;
    r.exec_start_us = a.exec_start_us;
    r.exec_end_us = a.exec_end_us;
    r.executor = executor_of(a.executor);
    r.owner = executor_of(a.owner);
    if (a.job >= 0) std::memcpy(r.job_id.data(), jobs_[a.job].Data(), JobID::kSize);
    AddRow(&out, r);
    if (a.error) {
      rpc::TaskEventError* e = out.add_errors();
      e->set_row(row);
      *e->mutable_error() = *a.error;
    }
  }
  return out;
}

int64_t GcsTaskManager::FirstSeen(const Attempt& a) {
  for (int64_t us : a.state_us) {
    if (us > 0) return us;
  }
  return a.exec_start_us;
}

void GcsTaskManager::RecordOwn(const rpc::TaskSpec& spec, int attempt, rpc::TaskStatus status,
                               const rpc::TaskExecutor* executor, const rpc::TaskResult* result,
                               const rpc::ErrorInfo* error) {
  if (status < rpc::PENDING_ARGS_AVAIL || status > rpc::FAILED || spec.task_id().size() != TaskID::kSize) return;
  rpc::TaskEventBatch b;
  b.set_job_id(spec.job_id());
  *b.add_kinds() = TaskKindOf(spec);
  TaskEventRow row;
  row.SetTaskId(TaskID::FromBinary(spec.task_id()));
  row.attempt = attempt;
  row.kind = 0;
  if (spec.parent_task_id().size() == TaskID::kSize) row.SetParentTaskId(TaskID::FromBinary(spec.parent_task_id()));
  row.state_us[status - 1] = absl::GetCurrentTimeNanos() / 1000;
  if (result != nullptr && result->start_unix_us() > 0) {
    row.exec_start_us = result->start_unix_us();
    row.exec_end_us = result->start_unix_us() + std::max<int64_t>(result->run_us(), 0);
  }
  if (executor != nullptr) {
    row.executor = 0;
    *b.add_executors() = *executor;
  }
  AddRow(&b, row);
  if (error != nullptr) {
    rpc::TaskEventError* e = b.add_errors();
    e->set_row(0);
    *e->mutable_error() = *error;
  }
  absl::Status s = AddBatch(b);
  if (!s.ok()) LOG(WARNING) << "recording the GCS's own task event: " << s;
}

rpc::TaskStatus GcsTaskManager::StateOf(const Attempt& a) {
  if (a.state_us[rpc::FAILED - 1] > 0) return rpc::FAILED;
  for (int s = kNumStates - 1; s >= 0; --s) {
    if (a.state_us[s] > 0) return static_cast<rpc::TaskStatus>(s + 1);
  }
  return rpc::TASK_STATUS_NIL;
}

std::string GcsTaskManager::StateName(const Attempt& a) {
  const rpc::TaskStatus state = StateOf(a);
  if (state == rpc::FAILED && a.error && a.error->type() == rpc::TASK_CANCELLED) return "CANCELLED";
  return rpc::TaskStatus_Name(state);
}

void GcsTaskManager::CountState(int32_t kind, rpc::TaskStatus state, int64_t delta) {
  if (state == rpc::TASK_STATUS_NIL) return;
  // (kind + 1, state - 1): kind -1 is "(unknown)".
  const size_t at = static_cast<size_t>(kind + 1) * kNumStates + static_cast<size_t>(state - 1);
  if (at >= state_counts_.size()) state_counts_.resize((static_cast<size_t>(kinds_.size()) + 1) * kNumStates);
  state_counts_[at] = std::max<int64_t>(0, state_counts_[at] + delta);
}

std::map<std::pair<std::string, rpc::TaskStatus>, int64_t> GcsTaskManager::StateCounts() const {
  std::map<std::pair<std::string, rpc::TaskStatus>, int64_t> out;
  for (size_t at = 0; at < state_counts_.size(); ++at) {
    if (state_counts_[at] == 0) continue;
    const int64_t kind = static_cast<int64_t>(at / kNumStates) - 1;
    const std::string name = kind >= 0 ? kinds_[kind].function_name() : "(unknown)";
    out[{name, static_cast<rpc::TaskStatus>(at % kNumStates + 1)}] += state_counts_[at];
  }
  return out;
}

void GcsTaskManager::Erase(uint32_t slot) {
  Slot& s = slots_[slot];
  const rpc::TaskStatus state = StateOf(s.attempt);
  if (state != rpc::FINISHED && state != rpc::FAILED) CountState(s.attempt.kind, state, -1);
  bytes_ -= kAttemptBytes;
  if (s.attempt.error) bytes_ -= ErrorBytes(*s.attempt.error);
  index_.erase(s.key);
  Unlink(slot);
  s.attempt = Attempt();
  free_slots_.push_back(slot);
}

void GcsTaskManager::Evict() {
  while (static_cast<int64_t>(index_.size()) > limits_.max_num || bytes_ > limits_.max_bytes) {
    const uint32_t victim = terminal_.head != kNone ? terminal_.head : active_.head;
    if (victim == kNone) break;
    Erase(victim);
    ++evicted_;
  }
}

std::string GcsTaskManager::FieldOf(const Key& key, const Attempt& a, const std::string& field) const {
  const rpc::TaskKind* kind = a.kind >= 0 ? &kinds_[a.kind] : nullptr;
  const rpc::TaskExecutor* executor = a.executor >= 0 ? &executors_[a.executor] : nullptr;
  if (field == "task_id") return key.task_id.Hex();
  if (field == "attempt_number") return std::to_string(key.attempt);
  if (field == "state") return StateName(a);
  if (field == "name") return kind == nullptr ? "" : kind->name().empty() ? kind->function_name() : kind->name();
  if (field == "func_or_class_name") return kind == nullptr ? "" : kind->function_name();
  if (field == "job_id") return a.job >= 0 ? jobs_[a.job].Hex() : "";
  if (field == "actor_id") return kind == nullptr ? "" : BinaryHex(kind->actor_id());
  if (field == "type") return kind == nullptr ? "" : TaskTypeName(kind->type());
  if (field == "parent_task_id") return kind == nullptr || a.parent.IsNil() ? "" : a.parent.Hex();
  if (field == "node_id") return executor == nullptr ? "" : BinaryHex(executor->node_id());
  if (field == "worker_id") return executor == nullptr ? "" : BinaryHex(executor->worker_id());
  if (field == "worker_pid") return executor == nullptr ? "" : std::to_string(executor->pid());
  if (field == "error_type") return a.error ? rpc::ErrorType_Name(a.error->type()) : "";
  if (field == "placement_group_id") return kind == nullptr ? "" : BinaryHex(kind->placement_group_id());
  return "";
}

nlohmann::ordered_json GcsTaskManager::ToJson(const Key& key, const Attempt& a, bool detail) const {
  nlohmann::ordered_json j;
  for (const char* field : {"task_id", "attempt_number", "name", "state", "job_id", "actor_id", "type",
                            "func_or_class_name", "parent_task_id", "node_id", "worker_id", "error_type"}) {
    j[field] = FieldOf(key, a, field);
  }
  j["attempt_number"] = key.attempt;
  const rpc::TaskExecutor* executor = a.executor >= 0 ? &executors_[a.executor] : nullptr;
  if (executor != nullptr) j["worker_pid"] = executor->pid();
  j["error_message"] = a.error ? a.error->message() : "";
  if (a.exec_start_us > 0) j["start_time_ms"] = a.exec_start_us / 1000;
  if (a.exec_end_us > 0) j["end_time_ms"] = a.exec_end_us / 1000;
  if (!detail) return j;
  j["creation_time_ms"] = a.state_us[0] / 1000;
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (int s = 0; s < kNumStates; ++s) {
    if (a.state_us[s] <= 0) continue;
    events.push_back({{"state", rpc::TaskStatus_Name(static_cast<rpc::TaskStatus>(s + 1))},
                      {"created_ms", a.state_us[s] / 1000}});
  }
  j["events"] = std::move(events);
  if (a.kind >= 0) {
    const rpc::TaskKind& kind = kinds_[a.kind];
    nlohmann::ordered_json resources = nlohmann::ordered_json::object();
    for (const rpc::ResourceQuantity& r : kind.required_resources()) resources[r.name()] = r.quantity();
    j["required_resources"] = std::move(resources);
    if (!kind.placement_group_id().empty()) j["placement_group_bundle_index"] = kind.bundle_index();
  }
  if (a.error && !a.error->exception_type().empty()) j["exception_type"] = a.error->exception_type();
  return j;
}

absl::Status GcsTaskManager::CheckFilters(const std::vector<rpc::StateFilter>& filters) {
  return CheckStateFilters("tasks", FilterKeys(), filters);
}

bool GcsTaskManager::Matches(const Key& key, const Attempt& a, const std::vector<rpc::StateFilter>& filters) const {
  for (const rpc::StateFilter& f : filters) {
    if (!PassesStateFilter(FieldOf(key, a, f.key()), f)) return false;
  }
  return true;
}

absl::StatusOr<nlohmann::ordered_json> GcsTaskManager::Summarize(const std::vector<rpc::StateFilter>& filters) const {
  MANTA_RETURN_IF_ERROR(CheckFilters(filters));
  // Counted per kind first (few), named after.
  // Per state, and CANCELLED (a kind of FAILED) last.
  constexpr int kCancelledSlot = kNumStates + 1;
  absl::flat_hash_map<int32_t, std::array<int64_t, kNumStates + 2>> per_kind;
  int64_t total = 0;
  for (const Slot& slot : slots_) {
    if (slot.list == ListId::kFree) continue;
    const Attempt& a = slot.attempt;
    if (!filters.empty() && !Matches(slot.key, a, filters)) continue;
    ++total;
    const bool cancelled = a.error && a.error->type() == rpc::TASK_CANCELLED && StateOf(a) == rpc::FAILED;
    ++per_kind[a.kind][cancelled ? kCancelledSlot : StateOf(a)];
  }
  nlohmann::ordered_json by_name = nlohmann::ordered_json::object();
  for (const auto& [kind, counts] : per_kind) {
    const std::string name = kind >= 0 ? kinds_[kind].function_name() : "(unknown)";
    nlohmann::ordered_json& entry = by_name[name];
    entry["type"] = kind >= 0 ? TaskTypeName(kinds_[kind].type()) : "";
    for (int s = 0; s <= kCancelledSlot; ++s) {
      if (counts[s] == 0) continue;
      const std::string state =
          s == kCancelledSlot ? std::string("CANCELLED") : rpc::TaskStatus_Name(static_cast<rpc::TaskStatus>(s));
      nlohmann::ordered_json& state_counts = entry["state_counts"];
      if (!state_counts.is_object()) state_counts = nlohmann::ordered_json::object();
      state_counts[state] = state_counts.value(state, int64_t{0}) + counts[s];
    }
  }
  return nlohmann::ordered_json{{"total", total}, {"by_name", std::move(by_name)}};
}

absl::StatusOr<GcsTaskManager::ListResult> GcsTaskManager::List(const std::vector<rpc::StateFilter>& filters,
                                                                int64_t limit, bool detail) const {
  MANTA_RETURN_IF_ERROR(CheckFilters(filters));
  ListResult result;
  std::vector<std::pair<int64_t, const Slot*>> matched;
  for (const Slot& slot : slots_) {
    if (slot.list != ListId::kFree && Matches(slot.key, slot.attempt, filters)) {
      matched.emplace_back(FirstSeen(slot.attempt), &slot);
    }
  }
  result.num_matched = static_cast<int64_t>(matched.size());
  // Oldest first.
  const size_t n = std::min<size_t>(matched.size(), static_cast<size_t>(std::max<int64_t>(limit, 0)));
  std::partial_sort(matched.begin(), matched.begin() + static_cast<std::ptrdiff_t>(n), matched.end(),
                    [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t i = 0; i < n; ++i) result.rows.push_back(ToJson(matched[i].second->key, matched[i].second->attempt, detail));
  return result;
}

}  // namespace manta::gcs
