// Reads of remote objects take turns for room in the store (ARCHITECTURE.md §9), as
// Ray's pull manager admits a Get's objects: a reader's fetch (the objects of one
// Get or Wait not here yet) is started only while its bytes fit in what the store
// could still take beside the fetches started before it and not done; the others
// wait, first come first (no starvation). The first always goes, so a fetch larger
// than the room left waits for nothing but the store's own back-pressure (its
// creates wait for spilling). Without turns, readers pulling at once evict each
// other's copies before they are read, and pull them again.
//
// On the raylet's loop only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "src/common/event_loop.h"

namespace manta::raylet {

class FetchAdmission {
 public:
  // Run when a fetch is done (every object pulled or failed); once.
  using Done = absl::AnyInvocable<void()>;
  // Starts an admitted fetch; it calls `done` when it is over.
  using Start = absl::AnyInvocable<void(Done done)>;

  // `room()`: bytes the store could take now (its capacity less what is in use).
  // While fetches wait, the room is looked at again every `poll_ms`, as memory is
  // freed by others than fetches.
  FetchAdmission(EventLoop& loop, std::function<int64_t()> room, int64_t poll_ms = 10);
  ~FetchAdmission();

  // Queues a fetch of `bytes` and starts what fits (maybe this one, at once).
  void Add(int64_t bytes, Start start);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_active() const { return active_; }
  int64_t active_bytes() const { return active_bytes_; }

 private:
  struct Waiting {
    int64_t bytes;
    Start start;
  };
  void Admit();

  EventLoop& loop_;
  std::function<int64_t()> room_;
  int64_t poll_ms_;
  std::deque<Waiting> waiting_;
  size_t active_ = 0;
  int64_t active_bytes_ = 0;
  bool admitting_ = false;
  std::unique_ptr<Timer> poll_timer_;
  // Cleared on destruction: a fetch done later changes nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::raylet
