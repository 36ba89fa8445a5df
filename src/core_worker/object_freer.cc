#include "src/core_worker/object_freer.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "protos/node_manager.pb.h"

namespace manta::core {

void ObjectFreer::Queue(const std::string& raylet_address, const std::vector<ObjectID>& ids) {
  bool post;
  {
    absl::MutexLock lock(&mu_);
    auto& queued = pending_[raylet_address];
    queued.insert(queued.end(), ids.begin(), ids.end());
    post = !flush_posted_;
    flush_posted_ = true;
  }
  if (post) loop_.Post("CoreWorker.FreePlasma", [this] { Flush(); });
}

void ObjectFreer::FlushLocal() {
  std::vector<ObjectID> ids;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(local_raylet_);
    if (it == pending_.end()) return;
    ids.swap(it->second);
    pending_.erase(it);
  }
  if (ids.empty() || store_.Delete(ids, /*wait=*/false).ok()) return;
  Queue(local_raylet_, ids);  // the loop tries again, then through the raylet
}

void ObjectFreer::Flush() {
  absl::flat_hash_map<std::string, std::vector<ObjectID>> frees;
  {
    absl::MutexLock lock(&mu_);
    frees.swap(pending_);
    flush_posted_ = false;
  }
  for (const auto& [raylet, ids] : frees) {
    if (raylet == local_raylet_) {
      // Our own node: straight to the store over its socket, no RPC to the raylet.
      absl::Status s = store_.Delete(ids, /*wait=*/false);
      if (s.ok()) continue;
      VLOG(1) << "deleting " << ids.size() << " objects from the local store: " << s;
    }
    rpc::FreeObjectsRequest request;
    for (const ObjectID& id : ids) request.add_object_ids(id.Binary());
    raylets_.Get(raylet)->FreeObjects(request, [raylet](const absl::Status& s, rpc::FreeObjectsReply&&) {
      if (!s.ok()) VLOG(1) << "freeing objects at " << raylet << ": " << s;
    });
  }
}

void ObjectFreer::AddCopy(const ObjectID& id, const std::string& raylet_address) {
  absl::MutexLock lock(&mu_);
  auto& copies = copies_[id];
  if (std::find(copies.begin(), copies.end(), raylet_address) == copies.end()) copies.push_back(raylet_address);
}

std::vector<std::string> ObjectFreer::CopiesOf(const ObjectID& id) const {
  absl::MutexLock lock(&mu_);
  auto it = copies_.find(id);
  return it == copies_.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> ObjectFreer::TakeCopies(const ObjectID& id) {
  absl::MutexLock lock(&mu_);
  auto it = copies_.find(id);
  if (it == copies_.end()) return {};
  std::vector<std::string> copies = std::move(it->second);
  copies_.erase(it);
  return copies;
}

}  // namespace manta::core
