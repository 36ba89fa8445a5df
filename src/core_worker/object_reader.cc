#include "src/core_worker/object_reader.h"

#include <glog/logging.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "src/common/loop_call.h"
#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/core_worker/task_context.h"
#include "src/object_store/store_client.h"

namespace manta::core {

ObjectReader::ObjectReader(Parts parts, Hooks hooks, bool is_driver, const WorkerID& worker_id,
                           std::string local_raylet, const NodeID& node_id, const void* context_owner)
    : loop_(parts.loop),
      config_(parts.config),
      memory_store_(parts.memory_store),
      refs_(parts.refs),
      store_(parts.store),
      raylets_(parts.raylets),
      workers_(parts.workers),
      channels_(parts.channels),
      freer_(parts.freer),
      hooks_(std::move(hooks)),
      is_driver_(is_driver),
      worker_id_(worker_id),
      local_raylet_(std::move(local_raylet)),
      node_id_(node_id),
      context_owner_(context_owner) {}

namespace {
// Whether this thread runs a task holding a leased CPU (one it could lend).
bool HoldsLeasedCpu(bool is_driver, const void* context_owner) {
  return !is_driver && ScopedTaskContext::Current(context_owner) != nullptr;
}
}  // namespace

void ObjectReader::NotifyBlocked(bool blocked) {
  if (!HoldsLeasedCpu(is_driver_, context_owner_)) return;
  rpc::NotifyWorkerBlockedRequest request;
  request.set_worker_id(worker_id_.Binary());
  request.set_blocked(blocked);
  raylets_.Get(local_raylet_)
      ->NotifyWorkerBlocked(request, [](const absl::Status& s, rpc::NotifyWorkerBlockedReply&&) {
        if (!s.ok()) LOG(WARNING) << "NotifyWorkerBlocked: " << s;
      });
}

void ObjectReader::NotifyWhenReady(const ObjectID& id, std::function<void()> ready) {
  if (!refs_.HasReference(id)) return ready();  // Get says why
  if (!refs_.IsOwnedByUs(id) && !memory_store_.Contains(id)) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, id] { RequestFromOwners({id}); });
  }
  memory_store_.GetAsync(id, [this, id, ready = std::move(ready)](StoredObjectPtr value) mutable {
    if (!value->in_plasma || !value->error.ok() || value->plasma_node().IsNil() || value->plasma_node() == node_id_) {
      return ready();
    }
    loop_.Post("CoreWorker.PullForAwait", [this, id, value = std::move(value), ready = std::move(ready)]() mutable {
      PullThenNotify(id, value, std::move(ready));
    });
  });
}

void ObjectReader::PullThenNotify(const ObjectID& id, const StoredObjectPtr& marker, std::function<void()> ready) {
  rpc::FetchObjectsRequest request;
  AddFetched(id, *marker, &request);
  raylets_.Get(local_raylet_)
      ->FetchObjects(request, config_.object_manager_pull_timeout_ms,
                     [this, id, ready = std::move(ready)](const absl::Status& s, rpc::FetchObjectsReply&& reply) {
                       if (s.ok() && reply.failures_size() == 0) hooks_.record_copy(id, node_id_, local_raylet_);
                       ready();
                     });
}

void ObjectReader::RequestFromOwners(const std::vector<ObjectID>& ids,
                                   const absl::flat_hash_map<ObjectID, std::string>& lost_at) {
  for (const ObjectID& id : ids) {
    if (memory_store_.Contains(id) || !owner_requests_.insert(id).second) continue;
    auto owner = refs_.GetOwner(id);
    if (!owner.ok()) {
      owner_requests_.erase(id);
      memory_store_.Put(id, MakeErrorObject(rpc::OBJECT_LOST, "object " + id.Hex() + " is unknown to this process"));
      continue;
    }
    rpc::GetObjectStatusRequest request;
    request.set_object_id(id.Binary());
    request.set_owner_worker_id(owner->worker_id.Binary());
    if (auto lost = lost_at.find(id); lost != lost_at.end()) request.set_lost_at(lost->second);
    Address owner_address = *owner;
    if (hooks_.is_node_dead(owner_address.node_id.Binary())) {
      owner_requests_.erase(id);
      refs_.HandleOwnerDied(owner_address);
      memory_store_.Put(id, MakeErrorObject(rpc::OWNER_DIED, "the owner of object " + id.Hex() + " (" +
                                                                 owner_address.ToString() +
                                                                 ") died: its node was declared dead"));
      continue;
    }
    workers_.Get(HostPort(owner_address), owner_address.node_id.Binary())
        ->GetObjectStatus(request, [this, id, owner_address](const absl::Status& s, rpc::GetObjectStatusReply&& r) {
          owner_requests_.erase(id);
          StoredObjectPtr value;
          if (!s.ok()) {
            refs_.HandleOwnerDied(owner_address);
            value = MakeErrorObject(rpc::OWNER_DIED, "the owner of object " + id.Hex() + " (" +
                                                         owner_address.ToString() +
                                                         ") died or is unreachable: " + std::string(s.message()));
          } else if (r.status() == rpc::GetObjectStatusReply::FAILED) {
            value = MakeErrorObject(r.error());
          } else if (r.status() == rpc::GetObjectStatusReply::OUT_OF_SCOPE) {
            value = MakeErrorObject(rpc::OBJECT_LOST,
                                    "object " + id.Hex() + " was already freed by its owner " + owner_address.ToString());
          } else {
            auto obj = std::make_shared<StoredObject>();
            obj->size_bytes = r.size_bytes();
            if (r.node_ids_size() > 0 && r.raylet_addresses_size() > 0) {
              obj->in_plasma = true;
              auto n = NodeID::FromBinaryChecked(r.node_ids(0));
              obj->SetPlasmaLocation(n.ok() ? *n : NodeID::Nil(), r.raylet_addresses(0));
              if (r.raylet_addresses_size() > 1) {
                obj->SetPlasmaCopies({r.raylet_addresses().begin() + 1, r.raylet_addresses().end()});
              }
            } else {
              obj->data = std::move(*r.mutable_data());
              obj->metadata = std::move(*r.mutable_metadata());
            }
            value = std::move(obj);
          }
          memory_store_.Put(id, std::move(value));
          // The last ref may have gone while we asked: nothing will free it later.
          if (!refs_.HasReference(id)) memory_store_.Delete({id});
        });
  }
}

namespace {
// Before round `round` (1, 2, ...) of asking for room in the store again: 10 ms,
// doubling, at most a second, and never past the caller's deadline.
void PauseBeforeRound(int round, int64_t deadline_ms) {
  int64_t pause_ms = std::min<int64_t>(int64_t{10} << std::min(round - 1, 7), 1000);
  if (deadline_ms >= 0) pause_ms = std::min(pause_ms, std::max<int64_t>(0, deadline_ms - MonotonicMs()));
  std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
}
}  // namespace

absl::StatusOr<std::vector<ObjectValue>> ObjectReader::Get(const std::vector<ObjectID>& ids, int64_t timeout_ms) {
  // A copy lost with its node is rebuilt (by its owner) and read again, a few times.
  return GetWithRecovery(ids, timeout_ms, static_cast<int>(config_.object_recovery_rounds));
}

absl::StatusOr<std::vector<ObjectValue>> ObjectReader::GetWithRecovery(const std::vector<ObjectID>& ids,
                                                                     int64_t timeout_ms, int recovery_rounds) {
  int64_t deadline = timeout_ms < 0 ? -1 : MonotonicMs() + timeout_ms;
  auto blocked_or = AwaitAbsent(ids, timeout_ms);
  if (!blocked_or.ok()) return blocked_or.status();
  const bool blocked = *blocked_or;
  // What is left of the timeout (AwaitAbsent may have waited a little).
  const int64_t wait_ms = deadline < 0 ? -1 : std::max<int64_t>(0, deadline - MonotonicMs());
  std::vector<StoredObjectPtr> values = memory_store_.Get(ids, ids.size(), wait_ms);
  std::vector<ObjectValue> out(ids.size());
  std::vector<ObjectID> plasma_ids;
  std::vector<StoredObjectPtr> markers;
  std::vector<size_t> positions;
  absl::Status status;
  for (size_t i = 0; i < ids.size(); ++i) {
    const StoredObjectPtr& v = values[i];
    if (!v) {
      status = absl::DeadlineExceededError("Get timed out after " + std::to_string(timeout_ms) +
                                           " ms waiting for object " + ids[i].Hex());
      break;
    }
    if (!v->error.ok()) {
      out[i].error = v;
    } else if (v->in_plasma) {
      plasma_ids.push_back(ids[i]);
      markers.push_back(v);
      positions.push_back(i);
    } else {
      out[i].data = v->data.data();
      out[i].size = v->data.size();
      out[i].holder = v;
    }
  }
  std::vector<size_t> lost;
  if (status.ok() && !plasma_ids.empty()) {
    status = ReadPlasmaValues(plasma_ids, markers, deadline, &out, positions, &lost);
  }
  if (blocked) NotifyBlocked(false);
  if (!status.ok()) return status;
  if (lost.empty() || recovery_rounds <= 0) return out;
  RecoverLost(ids, values, out, lost);
  // What was read is let go while the lost objects are made again, and read again
  // with them (a Get is read whole): held meanwhile, readers' parts of their objects
  // could fill the store, and the tasks re-run to rebuild the rest could not store
  // their results.
  out.clear();
  int64_t left = deadline < 0 ? -1 : std::max<int64_t>(0, deadline - MonotonicMs());
  return GetWithRecovery(ids, left, recovery_rounds - 1);
}

absl::StatusOr<bool> ObjectReader::AwaitAbsent(const std::vector<ObjectID>& ids, int64_t timeout_ms) {
  std::vector<ObjectID> borrowed_absent;
  const std::vector<size_t> absent = memory_store_.AbsentPositions(ids);
  for (size_t position : absent) {
    const ObjectID& id = ids[position];
    if (!refs_.HasReference(id)) {
      return absl::NotFoundError("object " + id.Hex() +
                                 " is unknown to this process (no live ObjectRef to it was created here)");
    }
    if (!refs_.IsOwnedByUs(id)) borrowed_absent.push_back(id);
  }
  if (!borrowed_absent.empty()) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, borrowed_absent] { RequestFromOwners(borrowed_absent); });
  }
  if (absent.empty() || timeout_ms == 0) return false;
  // Results of our own tasks: read them here rather than wait for the loop to.
  size_t next = 0;
  SpinOnTaskChannels([&] {
    while (next < absent.size() && memory_store_.Contains(ids[absent[next]])) ++next;
    return next == absent.size();
  });
  // A driver (or a thread outside a task) has no CPU to lend: it just waits.
  if (next == absent.size() || !HoldsLeasedCpu(is_driver_, context_owner_)) return false;
  // Most waits end within milliseconds (an owner's reply about a borrowed object, a
  // result on its way): only a longer one lends this task's CPU. Lent at once, it
  // starts another task that then competes with this one for the CPU once this one
  // goes on (a sort's reduces ran four at a time on two cores).
  constexpr int64_t kLendCpuAfterMs = 20;
  std::vector<ObjectID> still;
  for (size_t k = next; k < absent.size(); ++k) still.push_back(ids[absent[k]]);
  const int64_t grace = timeout_ms < 0 ? kLendCpuAfterMs : std::min(timeout_ms, kLendCpuAfterMs);
  std::vector<StoredObjectPtr> arrived = memory_store_.Get(still, still.size(), grace);
  const bool blocked = std::any_of(arrived.begin(), arrived.end(), [](const StoredObjectPtr& v) { return !v; });
  if (blocked) NotifyBlocked(true);
  return blocked;
}

void ObjectReader::RecoverLost(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& values,
                               const std::vector<ObjectValue>& out, const std::vector<size_t>& lost) {
  // Copies that could not be fetched: the owner rebuilds them; then read again.
  absl::flat_hash_map<ObjectID, std::string> borrowed_lost_at;
  for (size_t pos : lost) {
    const ObjectID& id = ids[pos];
    std::string cause(out[pos].error->error.message());
    if (refs_.IsOwnedByUs(id)) {
      hooks_.recover(id, values[pos], cause);
    } else if (StoredObjectPtr marker = memory_store_.GetIfExists(id); marker && marker->in_plasma) {
      memory_store_.Delete({id});
      borrowed_lost_at[id] = marker->plasma_raylet_address();
    }
  }
  if (!borrowed_lost_at.empty()) {
    std::vector<ObjectID> borrowed;
    for (const auto& [id, at] : borrowed_lost_at) borrowed.push_back(id);
    // Posted before the Get below posts its own request, so this one (with the
    // hint) is the one sent.
    loop_.Post("CoreWorker.ReportLost", [this, borrowed, borrowed_lost_at] {
      RequestFromOwners(borrowed, borrowed_lost_at);
    });
  }
}

bool ObjectReader::PollTaskChannels(bool* in_flight) {
  bool any = false;
  *in_flight = false;
  channels_.ForEachShared([&](const std::shared_ptr<TaskChannelInterface>& c) {
    if (c->InFlight() == 0) return;
    *in_flight = true;
    any |= c->Poll();
  });
  return any;
}

void ObjectReader::SpinOnTaskChannels(const std::function<bool()>& done) {
  const int64_t spin_us = config_.task_channel_spin_us;
  if (spin_us <= 0) return;
  auto now_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  // The loop is not woken for these channels' replies while this thread reads them.
  // (The vector keeps its capacity from one Get to the next: no allocation per task.)
  thread_local std::vector<std::shared_ptr<TaskChannelInterface>> spun;
  channels_.ForEachShared([&](const std::shared_ptr<TaskChannelInterface>& c) {
    if (c->InFlight() > 0) spun.push_back(c);
  });
  for (const auto& c : spun) c->BeginSpin();
  struct EndSpins {
    std::vector<std::shared_ptr<TaskChannelInterface>>& channels;
    ~EndSpins() {
      for (const auto& c : channels) c->EndSpin();
      channels.clear();
    }
  } end_spins{spun};
  int64_t until = now_us() + spin_us;
  for (int round = 1;; ++round) {
    bool in_flight = false;
    if (PollTaskChannels(&in_flight)) {
      if (done()) return;
      until = now_us() + spin_us;  // results keep coming: keep reading them here
    } else if (!in_flight || now_us() >= until) {
      return;  // nothing of ours is on the way, or it is slow: sleep
    } else if (round % 16 == 0 && done()) {
      return;  // the value came another way (the loop, another thread)
    } else {
      sched_yield();  // a thread runnable on this CPU (perhaps the worker) goes first
    }
  }
}

void ObjectReader::TakeFromStore(const ObjectID& id, const object_store::ObjectBuffer& buffer, ObjectValue* v) {
  // The store reference the Get took is dropped with the last holder of the value.
  object_store::ObjectStoreClientInterface* store = &store_;
  v->data = reinterpret_cast<const char*>(buffer.data);
  v->size = static_cast<size_t>(buffer.data_size);
  v->holder = std::shared_ptr<const void>(nullptr, [store, id](const void*) { store->Release(id).IgnoreError(); });
}

absl::Status ObjectReader::ReadPlasmaValues(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& markers,
                                          int64_t deadline_ms, std::vector<ObjectValue>* out,
                                          const std::vector<size_t>& positions, std::vector<size_t>* lost) {
  if (auto fits = CheckFitsInStore(ids, markers); !fits.ok()) return fits;
  auto got = store_.Get(ids, 0);
  if (!got.ok()) return got.status();
  std::vector<ObjectID> missing, here;
  std::vector<size_t> missing_pos, here_pos;
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*got)[i]) {
      here.push_back(ids[i]);
      here_pos.push_back(i);
    } else {
      missing.push_back(ids[i]);
      missing_pos.push_back(i);
    }
  }
  if (missing.empty()) {
    for (size_t k = 0; k < here.size(); ++k) TakeFromStore(here[k], *(*got)[here_pos[k]], &(*out)[positions[here_pos[k]]]);
    return absl::OkStatus();
  }
  // Not all here: what is here is let go and read again with the rest, in the
  // store's turn for this Get (holding part of it meanwhile could keep every Get
  // from completing).
  for (const ObjectID& id : here) store_.Release(id).IgnoreError();
  return FetchAndRead(std::move(missing), std::move(missing_pos), std::move(here), std::move(here_pos), markers,
                      deadline_ms, out, positions, lost);
}

absl::Status ObjectReader::FetchAndRead(std::vector<ObjectID> missing, std::vector<size_t> missing_pos,
                                      std::vector<ObjectID> here, std::vector<size_t> here_pos,
                                      const std::vector<StoredObjectPtr>& markers, int64_t deadline_ms,
                                      std::vector<ObjectValue>* out, const std::vector<size_t>& positions,
                                      std::vector<size_t>* lost) {
  // A copy pulled here may be evicted before the store Get below takes it (the Get
  // holds whatever arrives while it waits, not what came before): under memory
  // pressure that is how readers take turns, so it is pulled again, after a pause
  // that grows to a second, for as long as the caller waits (bounded, for a caller
  // that waits for ever, by ~17 minutes of rounds). A lost copy is found by the pull
  // failing, not by this count. A copy still in the store waits its turn to be
  // restored, as long as the caller waits.
  constexpr int kMaxPullRounds = 1000;
  for (int round = 1; !missing.empty(); ++round) {
    if (round > 1) PauseBeforeRound(round - 1, deadline_ms);
    if (auto s = PullToThisNode(missing, missing_pos, markers, deadline_ms, out, positions, lost); !s.ok()) return s;
    std::vector<ObjectID> fetch_ids = std::move(here);
    std::vector<size_t> fetch_pos = std::move(here_pos);
    here.clear();
    here_pos.clear();
    for (size_t k = 0; k < missing.size(); ++k) {
      if ((*out)[positions[missing_pos[k]]].error) continue;
      // Each pulled object now has a copy on this node, which its owner must delete
      // along with the object.
      if (round == 1) hooks_.record_copy(missing[k], node_id_, local_raylet_);
      fetch_ids.push_back(missing[k]);
      fetch_pos.push_back(missing_pos[k]);
    }
    missing.clear();
    missing_pos.clear();
    if (auto s = ReadFetched(std::move(fetch_ids), std::move(fetch_pos), round < kMaxPullRounds, deadline_ms, out,
                             positions, lost, &missing, &missing_pos);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

namespace {
// For each of `ids`, whether this node's store has it (in memory or spilled), among
// those not `held` already.
absl::StatusOr<std::vector<bool>> InStore(object_store::ObjectStoreClientInterface& store,
                                          const std::vector<ObjectID>& ids, const std::vector<bool>& held) {
  std::vector<bool> here(ids.size(), true);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (held[k]) continue;
    auto contains = store.Contains(ids[k]);
    if (!contains.ok()) return contains.status();
    here[k] = *contains;
  }
  return here;
}

// Releases the `held` ones of `ids`, adding them (and their `pos`) to *released
// (and *released_pos) when given.
void LetGo(object_store::ObjectStoreClientInterface& store, const std::vector<ObjectID>& ids,
           const std::vector<size_t>& pos, const std::vector<bool>& held, std::vector<ObjectID>* released,
           std::vector<size_t>* released_pos) {
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!held[k]) continue;
    store.Release(ids[k]).IgnoreError();
    if (released != nullptr) released->push_back(ids[k]);
    if (released_pos != nullptr) released_pos->push_back(pos[k]);
  }
}

constexpr char kGoneEachTime[] = " was fetched many times but its copy here was gone each time before it was read";
}  // namespace

absl::Status ObjectReader::ReadFetched(std::vector<ObjectID> ids, std::vector<size_t> pos, bool may_pull_again,
                                     int64_t deadline_ms, std::vector<ObjectValue>* out,
                                     const std::vector<size_t>& positions, std::vector<size_t>* lost,
                                     std::vector<ObjectID>* gone, std::vector<size_t>* gone_pos) {
  // A Get is read whole or not at all (readers each holding part of theirs could leave
  // room for none): when a copy is gone (evicted since its pull), all are let go and
  // pulled again, which moves nothing for a copy still here.
  auto pull_all_again = [&](const std::vector<bool>& held) {
    LetGo(store_, ids, pos, held, nullptr, nullptr);
    gone->insert(gone->end(), ids.begin(), ids.end());
    gone_pos->insert(gone_pos->end(), pos.begin(), pos.end());
    return absl::OkStatus();
  };
  while (!ids.empty()) {
    std::vector<bool> held(ids.size(), false);
    auto here = InStore(store_, ids, held);
    if (!here.ok()) return here.status();
    if (may_pull_again && std::find(here->begin(), here->end(), false) != here->end()) return pull_all_again(held);
    auto got = store_.Get(ids, deadline_ms < 0 ? config_.object_manager_pull_timeout_ms
                                               : std::max<int64_t>(0, deadline_ms - MonotonicMs()));
    if (!got.ok()) return got.status();
    for (size_t k = 0; k < ids.size(); ++k) held[k] = (*got)[k].has_value();
    here = InStore(store_, ids, held);
    if (!here.ok()) return here.status();
    if (std::find(here->begin(), here->end(), false) != here->end()) {
      if (may_pull_again) return pull_all_again(held);
      for (size_t k = 0; k < ids.size(); ++k) {
        if ((*here)[k]) continue;
        (*out)[positions[pos[k]]].error = MakeErrorObject(rpc::OBJECT_LOST, "object " + ids[k].Hex() + kGoneEachTime);
        lost->push_back(positions[pos[k]]);
      }
    }
    // Held, lost, or waiting in the store for room to be restored into.
    std::vector<ObjectID> again;
    std::vector<size_t> again_pos;
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!held[k] && (*here)[k]) {
        again.push_back(ids[k]);
        again_pos.push_back(pos[k]);
      }
    }
    if (again.empty()) {
      for (size_t k = 0; k < ids.size(); ++k) {
        if (held[k]) TakeFromStore(ids[k], *(*got)[k], &(*out)[positions[pos[k]]]);
      }
      return absl::OkStatus();
    }
    // Some wait for room still: all are let go and asked for again together.
    LetGo(store_, ids, pos, held, &again, &again_pos);
    if (deadline_ms >= 0 && MonotonicMs() >= deadline_ms) {
      return absl::DeadlineExceededError("Get timed out waiting for object " + again[0].Hex() +
                                         " to be restored or fetched into this node's object store");
    }
    LOG(INFO) << "Get: some of " << ids.size() << " object(s), e.g. " << again[0].Hex()
              << ", still wait for room in the object store";
    ids = std::move(again);
    pos = std::move(again_pos);
  }
  return absl::OkStatus();
}

absl::Status ObjectReader::CheckFitsInStore(const std::vector<ObjectID>& ids,
                                            const std::vector<StoredObjectPtr>& markers) const {
  // Every object of a Get is held in the store at once: more than it holds would
  // wait for ever.
  // Summed without a set first (every Get of the store's objects comes here); ids
  // listed twice are counted once only when that sum is too large.
  const int64_t capacity = store_.capacity_bytes();
  int64_t total = 0;
  for (const StoredObjectPtr& marker : markers) total += std::max<int64_t>(marker->size_bytes, 0);
  if (total <= capacity) return absl::OkStatus();
  absl::flat_hash_set<ObjectID> seen;
  total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (markers[i]->size_bytes > 0 && seen.insert(ids[i]).second) total += markers[i]->size_bytes;
  }
  if (total <= capacity) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      "a Get of " + std::to_string(seen.size()) + " objects of " + std::to_string(total) +
      " bytes in all cannot be held by this node's object store of " + std::to_string(capacity) +
      " bytes: get them in parts, or give the node a larger store (--object-store-memory)");
}

absl::Status ObjectReader::PullToThisNode(const std::vector<ObjectID>& missing, const std::vector<size_t>& missing_pos,
                                        const std::vector<StoredObjectPtr>& markers, int64_t deadline_ms,
                                        std::vector<ObjectValue>* out, const std::vector<size_t>& positions,
                                        std::vector<size_t>* lost) {
  // One request for the whole Get: the raylet admits it (pulls it) as a whole when
  // it fits beside the others', and keeps each copy for this reader until its Get.
  std::vector<size_t> todo(missing.size());
  for (size_t k = 0; k < todo.size(); ++k) todo[k] = k;
  auto remaining = [deadline_ms] { return deadline_ms < 0 ? int64_t{-1} : std::max<int64_t>(0, deadline_ms - MonotonicMs()); };
  auto mark_lost = [&](size_t k, const std::string& why) {
    (*out)[positions[missing_pos[k]]].error = MakeErrorObject(
        rpc::OBJECT_LOST, "object " + missing[k].Hex() + " could not be fetched from " +
                              markers[missing_pos[k]]->plasma_raylet_address() + ": " + why);
    lost->push_back(positions[missing_pos[k]]);
  };
  for (int round = 0;; ++round) {
    if (round > 0) PauseBeforeRound(round, deadline_ms);
    rpc::FetchObjectsRequest request;
    for (size_t k : todo) AddFetched(missing[k], *markers[missing_pos[k]], &request);
    absl::StatusOr<rpc::FetchObjectsReply> reply = Fetch(request, remaining());
    const absl::Status s = reply.status();
    if (absl::IsDeadlineExceeded(s)) {
      if (remaining() >= 0) return absl::DeadlineExceededError("Get timed out fetching object " + missing[todo[0]].Hex());
      continue;  // waited long for its turn (each pull has its own timeout): asks again
    }
    if (!s.ok()) {
      LOG(WARNING) << "Get: " << todo.size() << " object(s), e.g. " << missing[todo[0]].Hex()
                   << ", could not be fetched (" << s << "): their owners are told";
      for (size_t k : todo) mark_lost(k, std::string(s.message()));
      return absl::OkStatus();
    }
    // No room for a copy in this node's store, or none to restore it where it is
    // spilled, is not a loss: wait and ask again, as long as the caller waits.
    std::vector<size_t> busy;
    absl::flat_hash_map<std::string, size_t> index;
    for (size_t k : todo) index[missing[k].Binary()] = k;
    for (const auto& failure : reply->failures()) {
      auto it = index.find(failure.object_id());
      if (it == index.end()) continue;
      if (failure.code() == static_cast<int32_t>(absl::StatusCode::kResourceExhausted)) {
        busy.push_back(it->second);
        continue;
      }
      LOG(WARNING) << "Get: object " << missing[it->second].Hex() << " could not be fetched (" << failure.message()
                   << "): its owner is told";
      mark_lost(it->second, failure.message());
    }
    if (busy.empty()) return absl::OkStatus();
    if (deadline_ms >= 0 && MonotonicMs() >= deadline_ms) {
      return absl::DeadlineExceededError("Get timed out waiting for room in an object store to fetch " +
                                         missing[busy[0]].Hex());
    }
    LOG_EVERY_N(INFO, 20) << "Get: waiting for room in an object store to fetch " << busy.size()
                          << " object(s), e.g. " << missing[busy[0]].Hex();
    todo = std::move(busy);
  }
}

std::vector<bool> ObjectReader::Wait(const std::vector<ObjectID>& ids, int num_objects, int64_t timeout_ms,
                                     bool fetch_local) {
  const int64_t deadline_ms = timeout_ms < 0 ? -1 : MonotonicMs() + timeout_ms;
  std::vector<StoredObjectPtr> values = WaitReady(ids, num_objects, timeout_ms);
  std::vector<bool> ready(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ready[i] = values[i] != nullptr;
  if (fetch_local) FetchReadyHere(ids, values, num_objects, deadline_ms, &ready);
  return ready;
}

void ObjectReader::FetchReadyHere(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& values,
                                  int num_objects, int64_t deadline_ms, std::vector<bool>* ready) {
  // Ready objects whose copy is on another node count once a copy is here: as many
  // are pulled (in list order) as the count asks for beyond those already here.
  const size_t wanted = std::min(static_cast<size_t>(std::max(num_objects, 0)), ids.size());
  size_t here = 0;
  std::vector<size_t> remote;
  for (size_t i = 0; i < ids.size(); ++i) {
    const StoredObjectPtr& v = values[i];
    if (v == nullptr) continue;
    if (v->in_plasma && v->error.ok() && !v->plasma_node().IsNil() && v->plasma_node() != node_id_) {
      remote.push_back(i);
      (*ready)[i] = false;
    } else {
      ++here;
    }
  }
  if (remote.empty() || here >= wanted) return;
  remote.resize(std::min(remote.size(), wanted - here));
  std::vector<ObjectID> pull_ids;
  std::vector<StoredObjectPtr> markers;
  std::vector<size_t> pos;
  for (size_t k = 0; k < remote.size(); ++k) {
    pull_ids.push_back(ids[remote[k]]);
    markers.push_back(values[remote[k]]);
    pos.push_back(k);
  }
  std::vector<ObjectValue> pulled(remote.size());
  std::vector<size_t> lost;
  // A copy that cannot be pulled is ready all the same: Get reports (or repairs) it.
  if (!PullToThisNode(pull_ids, pos, markers, deadline_ms, &pulled, pos, &lost).ok()) return;  // timed out
  for (size_t k = 0; k < remote.size(); ++k) {
    (*ready)[remote[k]] = true;
    if (!pulled[k].error) hooks_.record_copy(pull_ids[k], node_id_, local_raylet_);
  }
}

std::vector<StoredObjectPtr> ObjectReader::WaitReady(const std::vector<ObjectID>& ids, int num_objects,
                                                     int64_t timeout_ms) {
  std::vector<ObjectID> borrowed_absent;
  for (const ObjectID& id : ids) {
    if (!memory_store_.Contains(id) && !refs_.IsOwnedByUs(id)) borrowed_absent.push_back(id);
  }
  if (!borrowed_absent.empty()) {
    loop_.Post("CoreWorker.RequestFromOwners", [this, borrowed_absent] { RequestFromOwners(borrowed_absent); });
  }
  const size_t wanted = std::min(static_cast<size_t>(std::max(num_objects, 0)), ids.size());
  bool satisfied = false;
  if (timeout_ms != 0) {
    SpinOnTaskChannels([&] {
      size_t present = 0;
      for (const ObjectID& id : ids) present += memory_store_.Contains(id) ? 1 : 0;
      satisfied = present >= wanted;
      return satisfied;
    });
  }
  // A worker waiting for long lends its CPU to the raylet meanwhile.
  if (!satisfied) NotifyBlocked(true);
  auto values = memory_store_.Get(ids, wanted, satisfied ? 0 : timeout_ms);
  if (!satisfied) NotifyBlocked(false);
  return values;
}

absl::StatusOr<rpc::FetchObjectsReply> ObjectReader::Fetch(const rpc::FetchObjectsRequest& request, int64_t wait_ms) {
  const int64_t rpc_deadline = wait_ms < 0 ? config_.object_manager_pull_timeout_ms * 4 : std::max<int64_t>(wait_ms, 1);
  auto raylet = raylets_.Get(local_raylet_);
  return CallOnLoop<rpc::FetchObjectsReply>(
      loop_, [raylet, request, rpc_deadline](auto done) { raylet->FetchObjects(request, rpc_deadline, std::move(done)); },
      rpc_deadline + 1000);
}

void ObjectReader::AddFetched(const ObjectID& id, const StoredObject& marker, rpc::FetchObjectsRequest* request) {
  request->add_object_ids(id.Binary());
  request->add_object_sizes(marker.size_bytes);
  // From the node holding its primary copy, then the others: as the owner knows
  // them (ours), or as it told us.
  auto* locations = request->add_object_locations()->mutable_addresses();
  if (!marker.plasma_raylet_address().empty()) locations->Add(std::string(marker.plasma_raylet_address()));
  std::vector<std::string> copies = refs_.IsOwnedByUs(id) ? freer_.CopiesOf(id) : marker.plasma_copies();
  for (std::string& copy : copies) {
    if (copy == local_raylet_ || std::find(locations->begin(), locations->end(), copy) != locations->end()) continue;
    locations->Add(std::move(copy));
  }
}

}  // namespace manta::core
