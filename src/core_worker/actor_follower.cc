#include "src/core_worker/actor_follower.h"

#include <glog/logging.h>

#include <limits>
#include <vector>

#include "src/gcs/gcs_client.h"
#include "src/gcs/gcs_subscriber.h"

namespace manta::core {

rpc::ActorTableData DeadActorState(const ActorID& actor_id, const std::string& why) {
  rpc::ActorTableData actor;
  actor.set_actor_id(actor_id.Binary());
  actor.set_state(rpc::ActorTableData::DEAD);
  actor.set_version(std::numeric_limits<int64_t>::max());  // no later state replaces it
  actor.mutable_death_cause()->set_type(rpc::ACTOR_DIED);
  actor.mutable_death_cause()->set_message("actor " + actor_id.Hex() + " is dead: " + why);
  return actor;
}

void ActorFollower::Follow(const ActorID& actor_id) {
  {
    absl::MutexLock lock(&mu_);
    if (!followed_.insert(actor_id).second) return;
  }
  loop_.Post("CoreWorker.FollowActor", [this, actor_id] { Subscribe(actor_id); });
}

void ActorFollower::Reserve(const ActorID& actor_id) {
  absl::MutexLock lock(&mu_);
  followed_.insert(actor_id);
}

void ActorFollower::Subscribe(const ActorID& actor_id) {
  subscriber_.SubscribeKey(rpc::GCS_ACTOR_CHANNEL, actor_id.Binary(),
                           [this, actor_id](absl::Status) { Refresh(actor_id); });
}

void ActorFollower::Forget(const ActorID& actor_id) {
  absl::MutexLock lock(&mu_);
  followed_.erase(actor_id);
}

void ActorFollower::Refresh(const ActorID& actor_id) {
  if (stopped_.load()) return;
  gcs_.AsyncGetActorInfo(actor_id.Binary(), [this, actor_id](const absl::Status& s, rpc::GetActorInfoReply&& reply) {
    if (s.code() == absl::StatusCode::kCancelled || stopped_.load()) return;
    if (!s.ok()) {
      LOG(WARNING) << "cannot read the state of actor " << actor_id.Hex() << " from the GCS: " << s
                   << "; asking again in " << retry_ms_ << " ms";
      loop_.PostAfter("CoreWorker.RefreshActor", retry_ms_, [this, actor_id] { Refresh(actor_id); });
      return;
    }
    if (!reply.found()) {
      on_state_(DeadActorState(actor_id, "the cluster at " + gcs_address_ +
                                             " does not know it (a handle from another cluster?)"));
      return;
    }
    on_state_(reply.actor());
  });
}

void ActorFollower::RefreshAll() {
  std::vector<ActorID> followed;
  {
    absl::MutexLock lock(&mu_);
    followed.assign(followed_.begin(), followed_.end());
  }
  for (const ActorID& id : followed) Refresh(id);
}

}  // namespace manta::core
