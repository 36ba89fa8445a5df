// NodeEventLog: the last events of what a raylet did with objects (pulls, spills,
// restores; rpc::NodeEvent), for the timeline's raylet tracks (ARCHITECTURE.md §18).
// A ring of `capacity` events; older ones are dropped and counted. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "protos/node_manager.pb.h"

namespace manta {

class NodeEventLog {
 public:
  explicit NodeEventLog(size_t capacity = 10000) : capacity_(capacity) {}

  void Record(rpc::NodeEvent event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
    if (events_.size() > capacity_) {
      events_.pop_front();
      ++dropped_;
    }
  }
  // Every event held, oldest first, and how many were dropped.
  std::vector<rpc::NodeEvent> Events(int64_t* dropped) const {
    absl::MutexLock lock(&mu_);
    if (dropped != nullptr) *dropped = dropped_;
    return std::vector<rpc::NodeEvent>(events_.begin(), events_.end());
  }

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<rpc::NodeEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Now in microseconds since the Unix epoch (the task events' clock).
inline int64_t NodeEventNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace manta
