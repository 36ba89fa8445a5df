#include "src/core_worker/primary_mover.h"

#include <glog/logging.h>

#include <utility>

namespace manta::core {

PrimaryMover::PrimaryMover(MemoryStore& store, ReferenceCounter& refs, raylet::RayletClientPool& raylets,
                           ObjectFreer& freer, rpc::Address self, int64_t batch_timeout_ms)
    : store_(store),
      refs_(refs),
      raylets_(raylets),
      freer_(freer),
      self_(std::move(self)),
      batch_timeout_ms_(batch_timeout_ms) {}

bool PrimaryMover::FirstDrain(const NodeID& node) {
  absl::MutexLock lock(&mu_);
  return drained_.insert(node).second;
}

std::vector<ObjectID> PrimaryMover::PrimariesOn(const NodeID& node) const {
  std::vector<ObjectID> out;
  for (const ReferenceCounter::OwnedObject& o : refs_.OwnedObjects()) {
    if (!o.pinned_at || *o.pinned_at != node) continue;
    StoredObjectPtr marker = store_.GetIfExists(o.id);
    if (marker && marker->in_plasma && marker->owner_copy && marker->plasma_node() == node) out.push_back(o.id);
  }
  return out;
}

void PrimaryMover::Move(const NodeID& from, const std::string& from_raylet, std::vector<Target> targets, Done done) {
  auto job = std::make_shared<Job>();
  job->from = from;
  job->from_raylet = from_raylet;
  job->targets = std::move(targets);
  job->queue = PrimariesOn(from);
  job->done = std::move(done);
  if (!job->queue.empty()) {
    LOG(INFO) << "node " << from.Hex() << " is draining: moving the " << job->queue.size()
              << " primary copies owned here off it";
  }
  NextBatch(job);
}

void PrimaryMover::NextBatch(const std::shared_ptr<Job>& job) {
  if (job->queue.empty() && !job->refused.empty() && job->target + 1 < job->targets.size()) {
    ++job->target;
    job->queue = std::move(job->refused);
    job->refused.clear();
  }
  if (job->queue.empty() || job->target >= job->targets.size()) {
    const auto left = static_cast<int64_t>(job->queue.size() + job->refused.size());
    LOG_IF(WARNING, left > 0) << left << " primary copies owned here stay on draining node " << job->from.Hex()
                              << ": no other node took them (" << job->targets.size() << " tried)";
    if (job->done) job->done(job->moved, left);
    return;
  }
  const Target& to = job->targets[job->target];
  const size_t n = std::min(kBatch, job->queue.size());
  std::vector<ObjectID> ids(job->queue.end() - static_cast<std::ptrdiff_t>(n), job->queue.end());
  job->queue.resize(job->queue.size() - n);
  rpc::FetchObjectsRequest request;
  std::vector<ObjectID> asked;
  std::vector<StoredObjectPtr> markers;
  for (const ObjectID& id : ids) {
    StoredObjectPtr marker = store_.GetIfExists(id);
    if (!marker || !marker->in_plasma || marker->plasma_node() != job->from) continue;  // freed, or moved
    request.add_object_ids(id.Binary());
    request.add_object_sizes(marker->size_bytes);
    asked.push_back(id);
    markers.push_back(std::move(marker));
  }
  if (asked.empty()) return NextBatch(job);
  request.add_locations(job->from_raylet);
  *request.mutable_pin_for_owner() = self_;
  raylets_.Get(to.raylet)->FetchObjects(
      request, batch_timeout_ms_,
      [this, job, asked = std::move(asked), markers = std::move(markers)](const absl::Status& s,
                                                                          rpc::FetchObjectsReply&& reply) {
        OnFetched(job, asked, markers, s, reply);
      });
}

void PrimaryMover::OnFetched(const std::shared_ptr<Job>& job, const std::vector<ObjectID>& ids,
                             const std::vector<StoredObjectPtr>& markers, const absl::Status& status,
                             const rpc::FetchObjectsReply& reply) {
  const Target& to = job->targets[job->target];
  absl::flat_hash_set<std::string> failed;
  for (const auto& f : reply.failures()) failed.insert(f.object_id());
  LOG_IF(WARNING, !status.ok()) << "moving " << ids.size() << " primary copies to " << to.raylet << ": " << status;
  LOG_IF(WARNING, status.ok() && !failed.empty())
      << to.raylet << " could not take " << failed.size() << " primary copies: "
      << reply.failures(0).message();
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!status.ok()) {
      // The target may still pin it after our deadline: freed there now, and again
      // with the object (a pin landing after this free).
      freer_.Queue(to.raylet, {ids[k]});
      freer_.AddCopy(ids[k], to.raylet);
      job->refused.push_back(ids[k]);
    } else if (failed.contains(ids[k].Binary())) {
      job->refused.push_back(ids[k]);
    } else if (Commit(*job, ids[k], markers[k], to)) {
      ++job->moved;
    }
  }
  NextBatch(job);
}

bool PrimaryMover::Commit(const Job& job, const ObjectID& id, const StoredObjectPtr& old, const Target& to) {
  auto moved = std::make_shared<StoredObject>();
  moved->in_plasma = true;
  moved->owner_copy = true;
  moved->size_bytes = old->size_bytes;
  moved->SetPlasmaLocation(to.node, to.raylet);
  if (!store_.Replace(id, old, std::move(moved))) {
    freer_.Queue(to.raylet, {id});  // freed (or rebuilt) meanwhile: the new copy goes too
    return false;
  }
  refs_.AddObjectLocation(id, to.node);
  refs_.UpdatePinnedAt(id, to.node);
  refs_.RemoveObjectLocation(id, job.from);
  freer_.Queue(job.from_raylet, {id});
  return true;
}

}  // namespace manta::core
