#include "src/object_store/object_store.h"

#include <limits>

#include <glog/logging.h>

#include "src/common/util.h"

namespace manta::object_store {

ObjectStore::ObjectStore(EventLoop& loop, int64_t capacity_bytes, ObjectStoreOptions options,
                         SpillerInterface* spiller, uint8_t* arena_base)
    : loop_(loop), options_(options), spiller_(spiller), base_(arena_base), allocator_(capacity_bytes) {}

ObjectStore::~ObjectStore() = default;

absl::Status ObjectStore::OutOfMemory(int64_t size) const {
  std::string msg = "object store full: cannot allocate " + std::to_string(size) + " bytes, and nothing could be spilled for " +
                    std::to_string(options_.create_timeout_ms) + " ms (capacity " +
                    std::to_string(allocator_.capacity()) + " bytes, " + std::to_string(allocator_.allocated_bytes()) +
                    " in use by objects that are referenced, pinned or being spilled)";
  if (!last_spill_error_.ok()) msg += "; spilling failed: " + std::string(last_spill_error_.message());
  return absl::ResourceExhaustedError(msg);
}

void ObjectStore::Create(ClientId client, const ObjectID& id, int64_t data_size, int64_t metadata_size,
                         bool pin_on_seal, CreateCallback callback) {
  if (data_size < 0 || metadata_size < 0) {
    return callback(absl::InvalidArgumentError("Create " + id.Hex() + ": negative size"));
  }
  bool pending_dup = false;
  for (const auto& p : pending_creates_) pending_dup |= p.id == id;
  if (objects_.contains(id) || pending_dup) {
    return callback(absl::AlreadyExistsError("object " + id.Hex() + " already exists"));
  }
  int64_t size = 0;
  if (!CheckedAdd(data_size, metadata_size, &size) || Allocator::RoundUp(size) > allocator_.capacity()) {
    return callback(absl::ResourceExhaustedError("object " + id.Hex() + " of " + std::to_string(data_size) + " + " +
                                                 std::to_string(metadata_size) +
                                                 " bytes is larger than the object store (" +
                                                 std::to_string(allocator_.capacity()) + " bytes)"));
  }
  AllocateOrQueue(client, id, size, MonotonicMs() + options_.create_timeout_ms,
                  [this, client, id, data_size, metadata_size, pin_on_seal,
                   callback = std::move(callback)](absl::StatusOr<int64_t> offset) mutable {
                    if (!offset.ok()) return callback(offset.status());
                    Entry& e = objects_[id];
                    e.state = State::kCreated;
                    e.location = {*offset, data_size, metadata_size};
                    e.in_memory = true;
                    e.creator = client;
                    e.pin_on_seal = pin_on_seal;
                    AddRef(client, id, e);
                    callback(e.location);
                  });
}

void ObjectStore::AllocateOrQueue(ClientId client, const ObjectID& id, int64_t size, int64_t deadline_ms,
                                  absl::AnyInvocable<void(absl::StatusOr<int64_t>)> done) {
  // Restores (a nil id; bounded by the Gets' turns) go before creates: a create
  // waiting for memory that an admitted Get holds must not hold up that Get's
  // restores.
  const bool restore = id.IsNil();
  std::list<PendingAlloc>& queue = restore ? pending_restores_ : pending_creates_;
  if (queue.empty() && (restore || pending_restores_.empty())) {
    if (auto offset = AllocateWithEviction(size)) return done(*offset);
  }
  queue.push_back({client, id, size, deadline_ms, std::move(done)});
  SpillForSpace(size);
  if (!create_timer_) {
    create_timer_ = loop_.RunEvery("ObjectStore.ExpireCreates", options_.create_check_ms, [this] { ExpireCreates(); });
  }
}

void ObjectStore::ProcessPendingCreates() {
  for (std::list<PendingAlloc>* queue : {&pending_restores_, &pending_creates_}) {
    while (!queue->empty()) {
      PendingAlloc& front = queue->front();
      auto offset = AllocateWithEviction(front.size);
      if (!offset) {
        SpillForSpace(front.size);
        return;
      }
      auto done = std::move(front.done);
      queue->pop_front();
      done(*offset);
    }
  }
  create_timer_.reset();
}

void ObjectStore::ExpireCreates() {
  int64_t now = MonotonicMs();
  if (pending_creates_.empty()) {
    create_timer_.reset();
    return;
  }
  // While spilling makes room, waiting is progress: the timeout counts only once
  // nothing can be spilled.
  if (spilling_bytes_ > 0 || SpillForSpace(pending_creates_.front().size)) {
    for (auto& p : pending_creates_) p.deadline_ms = std::max(p.deadline_ms, now + options_.create_timeout_ms);
    return;
  }
  bool expired = false;
  for (auto it = pending_creates_.begin(); it != pending_creates_.end();) {
    if (now < it->deadline_ms) {
      ++it;
      continue;
    }
    auto done = std::move(it->done);
    int64_t size = it->size;
    it = pending_creates_.erase(it);
    expired = true;
    done(OutOfMemory(size));
  }
  // Creations queued behind an expired one may fit in the memory it waited for.
  if (expired) ProcessPendingCreates();
  if (pending_creates_.empty()) create_timer_.reset();
}

std::optional<int64_t> ObjectStore::AllocateWithEviction(int64_t size) {
  std::optional<int64_t> offset = AllocateAndEvict(size);
  if (offset && options_.on_allocate) options_.on_allocate(*offset, size);
  return offset;
}

std::optional<int64_t> ObjectStore::AllocateAndEvict(int64_t size) {
  if (auto offset = allocator_.Allocate(size)) return offset;
  for (auto it = lru_.begin(); it != lru_.end();) {
    ObjectID id = *it;
    ++it;  // the entry may leave the list below
    Entry& e = objects_[id];
    if (e.ref_count > 0 || !e.in_memory || e.spilling || e.state != State::kSealed) continue;
    if (e.pinned && !e.spilled.has_value()) continue;  // a primary copy: spill, never evict
    if (e.pinned) {
      // Already on disk: drop the memory copy only.
      FreeMemory(id, e);
      e.state = State::kSpilled;
    } else {
      counters_.evicted_bytes_total += Size(e);
      VLOG(2) << "evicting " << id.Hex();
      EraseEntry(id);
    }
    if (auto offset = allocator_.Allocate(size)) return offset;
  }
  return std::nullopt;
}

bool ObjectStore::SpillForSpace(int64_t needed) {
  if (spiller_ == nullptr) return false;
  if (spilling_bytes_ >= needed) return true;
  int64_t target = std::max(needed - spilling_bytes_, options_.spill_min_bytes);
  std::vector<SpillItem> items;
  std::vector<ObjectID> ids;
  int64_t batch = 0;
  for (const ObjectID& id : lru_) {
    if (batch >= target) break;
    Entry& e = objects_[id];
    if (!e.pinned || e.spilled.has_value() || e.spilling || !e.in_memory || e.ref_count > 0 ||
        e.state != State::kSealed) {
      continue;
    }
    e.spilling = true;
    items.push_back({id, base_ + e.location.offset, Size(e)});
    ids.push_back(id);
    batch += Size(e);
  }
  if (items.empty()) return spilling_bytes_ > 0;
  spilling_bytes_ += batch;
  VLOG(1) << "spilling " << items.size() << " objects, " << batch << " bytes";
  rpc::NodeEvent event;
  event.set_kind("spill");
  event.set_start_unix_us(NodeEventNowUs());
  event.set_bytes(batch);
  event.set_num_objects(static_cast<int32_t>(ids.size()));
  event.set_object_id(ids.front().Binary());
  spiller_->SpillAsync(std::move(items), [this, ids = std::move(ids), event = std::move(event)](
                                             absl::StatusOr<std::vector<SpillLocation>> result) mutable {
    OnSpilled(std::move(ids), std::move(result), std::move(event));
  });
  return true;
}

void ObjectStore::OnSpilled(std::vector<ObjectID> ids, absl::StatusOr<std::vector<SpillLocation>> result,
                            rpc::NodeEvent event) {
  VLOG(1) << "spilled " << ids.size() << " objects: " << (result.ok() ? "ok" : result.status().ToString());
  if (options_.events != nullptr) {
    event.set_end_unix_us(NodeEventNowUs());
    event.set_ok(result.ok());
    options_.events->Record(std::move(event));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = objects_.find(ids[i]);
    if (it == objects_.end()) continue;
    Entry& e = it->second;
    spilling_bytes_ -= Size(e);
    e.spilling = false;
    if (result.ok()) {
      e.spilled = (*result)[i];
      counters_.spilled_bytes_total += Size(e);
    }
    if (e.delete_pending && e.ref_count == 0) {
      EraseEntry(ids[i]);
    } else if (result.ok() && e.ref_count == 0) {
      FreeMemory(ids[i], e);
      e.state = State::kSpilled;
    }
  }
  if (!result.ok()) {
    // Reported, not retried in a loop: waiting creates fail with the reason now.
    last_spill_error_ = result.status();
    LOG(ERROR) << "spilling failed: " << result.status();
    std::list<PendingAlloc> failed;
    failed.swap(pending_creates_);
    failed.splice(failed.end(), pending_restores_);
    create_timer_.reset();
    for (auto& p : failed) p.done(absl::ResourceExhaustedError("object store full and spilling failed: " +
                                                              std::string(result.status().message())));
    return;
  }
  last_spill_error_ = absl::OkStatus();
  ProcessPendingCreates();
}

void ObjectStore::StartRestore(const ObjectID& id) {
  Entry& e = objects_[id];
  if (e.restoring || e.state != State::kSpilled || !e.spilled.has_value()) return;
  e.restoring = true;
  // A restore waits for memory as long as the Gets it serves wait.
  AllocateOrQueue(kRayletClient, ObjectID::Nil(), Size(e), std::numeric_limits<int64_t>::max(),
                  [this, id](absl::StatusOr<int64_t> offset) {
    auto it = objects_.find(id);
    if (it == objects_.end()) {
      if (offset.ok()) allocator_.Free(*offset);
      return;
    }
    if (!offset.ok()) {
      LOG(WARNING) << "cannot restore " << id.Hex() << ": " << offset.status();
      it->second.restoring = false;
      if (it->second.delete_pending && it->second.ref_count == 0) EraseEntry(id);
      FailRestore(id);
      return;
    }
    SpillLocation where = *it->second.spilled;
    const int64_t started_us = NodeEventNowUs();
    VLOG(2) << "restoring " << id.Hex();
    spiller_->RestoreAsync(where, base_ + *offset, [this, id, off = *offset, started_us](absl::Status s) {
      auto it = objects_.find(id);
      RecordRestore(id, it != objects_.end() ? Size(it->second) : 0, started_us, s.ok());
      if (it == objects_.end()) {
        allocator_.Free(off);
        return;
      }
      Entry& e = it->second;
      e.restoring = false;
      if (!s.ok()) {
        LOG(ERROR) << "restoring " << id.Hex() << " failed: " << s;
        allocator_.Free(off);
        if (e.delete_pending && e.ref_count == 0) EraseEntry(id);
        FailRestore(id);
        return;
      }
      e.location.offset = off;
      e.in_memory = true;
      e.state = State::kSealed;
      counters_.restored_bytes_total += Size(e);
      if (e.delete_pending && e.ref_count == 0) {
        EraseEntry(id);
        return;
      }
      UpdateLru(id, e);
      OnSealed(id);
    });
  });
}

void ObjectStore::RecordRestore(const ObjectID& id, int64_t bytes, int64_t started_us, bool ok) {
  if (options_.events == nullptr) return;
  rpc::NodeEvent event;
  event.set_kind("restore");
  event.set_start_unix_us(started_us);
  event.set_end_unix_us(NodeEventNowUs());
  event.set_bytes(bytes);
  event.set_num_objects(1);
  event.set_object_id(id.Binary());
  event.set_ok(ok);
  options_.events->Record(std::move(event));
}

void ObjectStore::FailRestore(const ObjectID& id) {
  auto it = waiting_gets_.find(id);
  if (it == waiting_gets_.end()) return;
  auto gets = it->second;  // completing one edits the map
  for (auto& g : gets) TryCompleteGet(g, /*timed_out=*/true);
}

void ObjectStore::AdmitRestores() {
  while (!restore_queue_.empty()) {
    std::shared_ptr<PendingGet> get = restore_queue_.front();
    if (get->done) {
      restore_queue_.pop_front();
      continue;
    }
    // The first always goes (it alone may need most of the store); others while
    // they fit in what is neither in use nor still wanted by those admitted.
    if (!admitted_.empty() && AdmittedStillWant() + get->admit_bytes > allocator_.capacity() - InUseBytes()) {
      LogWaitingTurns();
      return;
    }
    restore_queue_.pop_front();
    get->admitted = true;
    admitted_.push_back(get);
    for (const ObjectID& id : get->ids) {
      if (Available(id)) {
        Hold(*get, id);
        continue;
      }
      auto it = objects_.find(id);
      if (it != objects_.end() && it->second.state == State::kSpilled) StartRestore(id);
    }
    TryCompleteGet(get, /*timed_out=*/false);  // everything may be here already
  }
}

void ObjectStore::LogWaitingTurns() {
  // Rate-limited: what Gets wait behind, for someone wondering why one waits.
  const int64_t now = MonotonicMs();
  if (now - last_turn_log_ms_ < 10000) return;
  last_turn_log_ms_ = now;
  absl::flat_hash_map<ClientId, int64_t> held_by;
  for (const auto& [client, refs] : client_refs_) {
    for (const auto& [id, count] : refs) {
      auto it = objects_.find(id);
      if (it != objects_.end() && it->second.in_memory) held_by[client] += Size(it->second);
    }
  }
  std::string holders;
  for (const auto& [client, bytes] : held_by) holders += " client " + std::to_string(client) + ": " + std::to_string(bytes);
  LOG(INFO) << restore_queue_.size() << " Get(s) wait for their turn to restore: " << admitted_.size()
            << " admitted still want " << AdmittedStillWant() << " bytes; " << InUseBytes() << " of "
            << allocator_.capacity() << " bytes in use (" << pending_restores_.size() << " restores, "
            << pending_creates_.size() << " creates wait for memory; " << spilling_bytes_
            << " bytes being spilled); held by" << holders;
}

int64_t ObjectStore::InUseBytes() const {
  int64_t bytes = 0;
  for (const auto& [id, e] : objects_) {
    if (e.in_memory && (e.ref_count > 0 || e.state == State::kCreated)) bytes += Size(e);
  }
  return bytes;
}

int64_t ObjectStore::AdmittedStillWant() const {
  int64_t bytes = 0;
  for (const auto& g : admitted_) bytes += std::max<int64_t>(0, g->admit_bytes - g->held_bytes);
  return bytes;
}

void ObjectStore::EndAdmission(PendingGet& get) {
  // A queued one is skipped by AdmitRestores (it may have held back the next).
  admitted_.erase(std::remove_if(admitted_.begin(), admitted_.end(), [&](const auto& g) { return g.get() == &get; }),
                  admitted_.end());
  get.admitted = false;
  if (!restore_queue_.empty()) AdmitRestores();
}

absl::Status ObjectStore::Seal(ClientId client, const ObjectID& id, bool release) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return absl::NotFoundError("Seal of unknown object " + id.Hex());
  Entry& e = it->second;
  if (e.state != State::kCreated) return absl::FailedPreconditionError("object " + id.Hex() + " is already sealed");
  if (e.creator != client) {
    return absl::PermissionDeniedError("object " + id.Hex() + " was created by another client");
  }
  e.state = State::kSealed;
  if (e.pin_on_seal) e.pinned = true;
  // Waiting Gets take their references first: dropping the creator's could let a
  // waiting Create evict the object before they see it.
  OnSealed(id);
  if (release) {
    auto again = objects_.find(id);  // callbacks may have changed the table
    if (again != objects_.end()) DropRef(client, id, again->second);
  }
  return absl::OkStatus();
}

absl::Status ObjectStore::Abort(ClientId client, const ObjectID& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return absl::NotFoundError("Abort of unknown object " + id.Hex());
  Entry& e = it->second;
  if (e.state != State::kCreated) return absl::FailedPreconditionError("object " + id.Hex() + " is already sealed");
  if (e.creator != client) {
    return absl::PermissionDeniedError("object " + id.Hex() + " was created by another client");
  }
  auto& refs = client_refs_[client];
  refs.erase(id);
  if (refs.empty()) client_refs_.erase(client);
  EraseEntry(id);
  ProcessPendingCreates();
  return absl::OkStatus();
}

void ObjectStore::Get(ClientId client, const std::vector<ObjectID>& ids, int64_t timeout_ms, GetCallback callback) {
  auto get = std::make_shared<PendingGet>();
  get->client = client;
  get->ids = ids;
  get->held.assign(ids.size(), false);
  get->callback = std::move(callback);
  bool all_ready = true;
  bool restores = false;
  for (const ObjectID& id : ids) {
    auto it = objects_.find(id);
    if (it != objects_.end() && it->second.state != State::kCreated) get->admit_bytes += Size(it->second);
    if (Available(id)) continue;
    all_ready = false;
    restores |= it != objects_.end() && it->second.state == State::kSpilled && !it->second.restoring;
  }
  if (all_ready || timeout_ms == 0) {
    TryCompleteGet(get, /*timed_out=*/true);
    return;
  }
  // Without restores it holds what is here at once (restoring others' objects must
  // not push it out); with them, once admitted.
  if (!restores) {
    get->admitted = true;
    get->admit_bytes = 0;  // takes no turn
    for (const ObjectID& id : ids) {
      if (Available(id)) Hold(*get, id);
    }
  }
  // Every id, available or not: one here now may be spilled before the Get's turn
  // comes, and is restored for it then.
  get->waited = true;
  for (const ObjectID& id : ids) waiting_gets_[id].push_back(get);
  client_gets_[client].push_back(get);
  if (timeout_ms > 0) {
    std::weak_ptr<PendingGet> weak = get;
    get->timer = loop_.RunAfter("ObjectStore.GetTimeout", timeout_ms, [this, weak] {
      if (auto g = weak.lock()) TryCompleteGet(g, /*timed_out=*/true);
    });
  }
  if (restores) {
    restore_queue_.push_back(get);
    AdmitRestores();
  }
  // The reader has come for its objects: what was held for it until now is its
  // Get's to hold (an admitted Get holds it already; one waiting for its turn to
  // restore holds nothing, or readers in line could keep the room every turn needs).
  if (client >= 1 && !reader_holds_.empty()) {
    for (const ObjectID& id : ids) DropReaderHold(id);
  }
}

void ObjectStore::TryCompleteGet(const std::shared_ptr<PendingGet>& get, bool timed_out) {
  if (get->done) return;
  bool all_ready = true;
  for (size_t i = 0; i < get->ids.size(); ++i) all_ready &= get->held[i] || Available(get->ids[i]);
  if (!all_ready && !timed_out) return;
  get->done = true;
  get->timer.reset();
  ForgetWaits(get);
  std::vector<std::optional<ObjectLocation>> results;
  results.reserve(get->ids.size());
  for (size_t i = 0; i < get->ids.size(); ++i) {
    const ObjectID& id = get->ids[i];
    auto it = objects_.find(id);
    if (!get->held[i] && !Available(id)) {
      if (it != objects_.end() && get->waited) {
        VLOG(1) << "Get of client " << get->client << " ends without " << id.Hex() << ": state "
                << static_cast<int>(it->second.state) << (it->second.restoring ? " restoring" : "")
                << (it->second.spilling ? " spilling" : "") << (get->admitted ? ", admitted" : ", not admitted");
      }
      results.emplace_back();
      continue;
    }
    if (!get->held[i]) AddRef(get->client, id, it->second);
    results.emplace_back(it->second.location);
  }
  auto& mine = client_gets_[get->client];
  mine.erase(std::remove(mine.begin(), mine.end(), get), mine.end());
  if (mine.empty()) client_gets_.erase(get->client);
  get->callback(std::move(results));
  EndAdmission(*get);
}

void ObjectStore::ForgetWaits(const std::shared_ptr<PendingGet>& get) {
  for (const ObjectID& id : get->ids) {
    auto it = waiting_gets_.find(id);
    if (it == waiting_gets_.end()) continue;
    auto& gets = it->second;
    gets.erase(std::remove(gets.begin(), gets.end(), get), gets.end());
    if (gets.empty()) waiting_gets_.erase(it);
  }
}

void ObjectStore::OnSealed(const ObjectID& id) {
  auto it = waiting_gets_.find(id);
  if (it == waiting_gets_.end()) return;
  auto gets = std::move(it->second);
  waiting_gets_.erase(it);
  // Every admitted Get waiting for it holds it before any of them completes (a
  // completion's callback may make room by spilling). One waiting for its turn
  // holds nothing: holding parts of many Gets could leave room for none.
  for (auto& g : gets) {
    if (g->admitted) Hold(*g, id);
  }
  for (auto& g : gets) TryCompleteGet(g, /*timed_out=*/false);
}

void ObjectStore::Hold(PendingGet& get, const ObjectID& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  for (size_t i = 0; i < get.ids.size(); ++i) {
    if (get.held[i] || get.ids[i] != id) continue;
    AddRef(get.client, id, it->second);
    get.held[i] = true;
    get.held_bytes += Size(it->second);
  }
}

bool ObjectStore::Available(const ObjectID& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && it->second.state == State::kSealed && !it->second.delete_pending;
}

absl::Status ObjectStore::Release(ClientId client, const ObjectID& id) {
  auto c = client_refs_.find(client);
  auto it = objects_.find(id);
  if (c == client_refs_.end() || !c->second.contains(id) || it == objects_.end()) {
    return absl::NotFoundError("Release of " + id.Hex() + ": this client holds no reference");
  }
  if (it->second.state == State::kCreated) {
    return absl::FailedPreconditionError("Release of unsealed object " + id.Hex() + "; Seal or Abort it");
  }
  DropRef(client, id, it->second);
  return absl::OkStatus();
}

bool ObjectStore::Contains(const ObjectID& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && it->second.state != State::kCreated && !it->second.delete_pending;
}

bool ObjectStore::ContainsOrCreating(const ObjectID& id) const {
  auto it = objects_.find(id);
  return it != objects_.end() && !it->second.delete_pending;
}

void ObjectStore::Delete(const std::vector<ObjectID>& ids) {
  for (const ObjectID& id : ids) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    Entry& e = it->second;
    e.pinned = false;
    if (e.ref_count > 0 || e.spilling || e.restoring) {
      e.delete_pending = true;
      continue;
    }
    EraseEntry(id);
  }
  ProcessPendingCreates();
}

void ObjectStore::DisconnectClient(ClientId client) {
  // Waiting gets and creates of a gone client must not take references for it.
  if (auto g = client_gets_.find(client); g != client_gets_.end()) {
    auto gets = std::move(g->second);
    client_gets_.erase(g);
    for (auto& get : gets) {
      get->done = true;
      get->timer.reset();
      ForgetWaits(get);
      EndAdmission(*get);
    }
  }
  for (auto it = pending_creates_.begin(); it != pending_creates_.end();) {
    if (it->client == client && !it->id.IsNil()) {
      it = pending_creates_.erase(it);
    } else {
      ++it;
    }
  }
  auto c = client_refs_.find(client);
  if (c == client_refs_.end()) {
    // Its queued creations may have blocked others'.
    ProcessPendingCreates();
    return;
  }
  auto refs = std::move(c->second);
  client_refs_.erase(c);
  for (const auto& [id, count] : refs) {
    auto it = objects_.find(id);
    if (it == objects_.end()) continue;
    Entry& e = it->second;
    if (e.state == State::kCreated && e.creator == client) {
      VLOG(1) << "aborting " << id.Hex() << ": its creator disconnected";
      EraseEntry(id);
      continue;
    }
    e.ref_count -= count;
    if (e.ref_count == 0) {
      if (e.delete_pending) {
        // A spill in flight still reads the memory; OnSpilled erases the object.
        if (!e.spilling) EraseEntry(id);
      } else {
        UpdateLru(id, e);
      }
    }
  }
  ProcessPendingCreates();
}

absl::Status ObjectStore::Pin(const ObjectID& id) {
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second.state == State::kCreated || it->second.delete_pending) {
    return absl::NotFoundError("cannot pin " + id.Hex() + ": not sealed in this store");
  }
  it->second.pinned = true;
  return absl::OkStatus();
}

void ObjectStore::SetOwner(const ObjectID& id, const WorkerID& owner) {
  auto it = objects_.find(id);
  if (it != objects_.end()) it->second.owner = owner;
}

int64_t ObjectStore::DeleteOwnedBy(const WorkerID& owner) {
  if (owner.IsNil()) return 0;
  std::vector<ObjectID> owned;
  for (const auto& [id, e] : objects_) {
    if (e.owner == owner && (e.pinned || e.pin_on_seal)) owned.push_back(id);
  }
  for (const ObjectID& id : owned) objects_[id].pinned = false;
  Delete(owned);
  return static_cast<int64_t>(owned.size());
}

void ObjectStore::Unpin(const ObjectID& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  it->second.pinned = false;
  ProcessPendingCreates();
}

void ObjectStore::HoldForReader(const ObjectID& id, int64_t timeout_ms) {
  auto it = objects_.find(id);
  if (it == objects_.end() || !Available(id) || !it->second.in_memory) return;
  auto& timer = reader_holds_[id];
  if (timer == nullptr) AddRef(kReaderHoldClient, id, it->second);
  timer = loop_.RunAfter("ObjectStore.ReaderHoldExpired", std::max<int64_t>(timeout_ms, 1),
                         [this, id] { DropReaderHold(id); });
}

void ObjectStore::DropReaderHold(const ObjectID& id) {
  if (reader_holds_.erase(id) == 0) return;
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  DropRef(kReaderHoldClient, id, it->second);
}

void ObjectStore::AddRef(ClientId client, const ObjectID& id, Entry& e) {
  if (e.ref_count == 0 && e.in_lru) {
    lru_.erase(e.lru_it);
    e.in_lru = false;
  }
  ++e.ref_count;
  ++client_refs_[client][id];
  // A worker took it: a hold for its reader is no longer needed (and dropping it
  // leaves the worker's reference, so nothing is evicted here).
  if (client >= 1 && !reader_holds_.empty() && reader_holds_.contains(id)) DropReaderHold(id);
}

void ObjectStore::DropRef(ClientId client, const ObjectID& id, Entry& e) {
  auto& refs = client_refs_[client];
  if (--refs[id] <= 0) refs.erase(id);
  if (refs.empty()) client_refs_.erase(client);
  if (--e.ref_count > 0) return;
  if (e.delete_pending) {
    // A spill in flight still reads the memory; OnSpilled erases the object.
    if (!e.spilling) EraseEntry(id);
    ProcessPendingCreates();
    return;
  }
  UpdateLru(id, e);
  if (!pending_creates_.empty() || !pending_restores_.empty()) ProcessPendingCreates();
  // Memory no longer in use may let the next Get restore.
  if (!restore_queue_.empty()) AdmitRestores();
}

void ObjectStore::UpdateLru(const ObjectID& id, Entry& e) {
  if (e.in_lru) lru_.erase(e.lru_it);
  e.in_lru = false;
  if (e.state == State::kSealed && e.in_memory && e.ref_count == 0) {
    e.lru_it = lru_.insert(lru_.end(), id);
    e.in_lru = true;
  }
}

void ObjectStore::FreeMemory(const ObjectID& id, Entry& e) {
  if (!e.in_memory) return;
  allocator_.Free(e.location.offset);
  e.in_memory = false;
  if (e.in_lru) {
    lru_.erase(e.lru_it);
    e.in_lru = false;
  }
}

void ObjectStore::EraseEntry(const ObjectID& id) {
  auto it = objects_.find(id);
  if (it == objects_.end()) return;
  Entry& e = it->second;
  FreeMemory(id, e);
  if (e.spilled.has_value() && spiller_ != nullptr) spiller_->Delete(*e.spilled);
  objects_.erase(it);
}

ObjectStoreStats ObjectStore::Stats() const {
  ObjectStoreStats s = counters_;
  s.capacity_bytes = allocator_.capacity();
  s.used_bytes = allocator_.allocated_bytes();
  s.num_pending_creates = static_cast<int64_t>(pending_creates_.size());
  for (const auto& [id, e] : objects_) {
    if (e.in_memory) ++s.num_objects;
    if (e.pinned) ++s.num_pinned;
    if (e.spilled.has_value()) {
      ++s.num_spilled;
      s.spilled_bytes_current += Size(e);
    }
  }
  return s;
}

int64_t ObjectStore::RefCount(const ObjectID& id) const {
  auto it = objects_.find(id);
  return it == objects_.end() ? 0 : it->second.ref_count;
}

}  // namespace manta::object_store
