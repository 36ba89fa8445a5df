// ActorFollower: follows the state of the actors this process calls or created
// (ARCHITECTURE.md §6).
//
// Each followed actor is one key of the GCS's actor channel, subscribed once. Its
// state is read from the GCS whenever the subscription (re)starts and whenever the
// GCS restarted (messages may have been lost meanwhile), and every state learned
// goes to `on_state`. An actor the GCS does not know is reported DEAD; a read that
// fails is asked again a little later. Follow() is for any thread; the rest runs on
// the loop.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "protos/gcs.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"

namespace manta::gcs {
class ActorInfoClientInterface;
class GcsSubscriber;
}  // namespace manta::gcs

namespace manta::core {

// The state reported for an actor the GCS cannot tell about: DEAD because of `why`.
rpc::ActorTableData DeadActorState(const ActorID& actor_id, const std::string& why);

class ActorFollower {
 public:
  using OnState = std::function<void(const rpc::ActorTableData&)>;
  // `gcs_address` names the cluster in errors; a failed read is asked again
  // `retry_ms` later.
  ActorFollower(EventLoop& loop, gcs::ActorInfoClientInterface& gcs, gcs::GcsSubscriber& subscriber,
                std::string gcs_address, int64_t retry_ms, OnState on_state)
      : loop_(loop), gcs_(gcs), subscriber_(subscriber), gcs_address_(std::move(gcs_address)), retry_ms_(retry_ms),
        on_state_(std::move(on_state)) {}

  // Follows `actor_id` from now on (once). Any thread.
  void Follow(const ActorID& actor_id);
  // An actor this process is creating: followed once the GCS registered it
  // (Subscribe, loop thread), forgotten when it could not (Forget, any thread).
  void Reserve(const ActorID& actor_id);
  void Subscribe(const ActorID& actor_id);
  void Forget(const ActorID& actor_id);
  // Reads the actor's state from the GCS. Loop thread.
  void Refresh(const ActorID& actor_id);
  // The GCS restarted: reads every followed actor again. Loop thread.
  void RefreshAll();
  // Shutdown: no further reads, and answers that come are dropped.
  void Stop() { stopped_.store(true); }

 private:
  EventLoop& loop_;
  gcs::ActorInfoClientInterface& gcs_;
  gcs::GcsSubscriber& subscriber_;
  const std::string gcs_address_;
  const int64_t retry_ms_;
  const OnState on_state_;
  std::atomic<bool> stopped_{false};
  absl::Mutex mu_;
  absl::flat_hash_set<ActorID> followed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
