// ActorCallOrder: the actor's worker's view of each caller's sequence of calls
// (ARCHITECTURE.md §6).
//
// Calls of one caller carry increasing sequence numbers. Each caller's calls travel
// on one connection, in order, so the worker needs no reordering buffer: it runs
// them as they come. A gap is normal (the caller failed the calls in between, e.g.
// when an earlier connection broke); a number at or below the last one accepted is
// a call that already ran here, and is refused rather than run twice. Reset() starts
// over for a new instance of the actor.
//
// Threading: the execution thread only.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace manta::core {

class ActorCallOrder {
 public:
  // Whether call `sequence` of `caller` may run; if not, *why says so.
  bool Accept(const std::string& caller, uint64_t sequence, std::string* why) {
    uint64_t& last = last_by_caller_[caller];
    if (sequence <= last) {
      *why = "call " + std::to_string(sequence) + " of this caller already ran on the actor (the last was " +
             std::to_string(last) + ")";
      return false;
    }
    last = sequence;
    return true;
  }
  void Reset() { last_by_caller_.clear(); }
  size_t num_callers() const { return last_by_caller_.size(); }

 private:
  absl::flat_hash_map<std::string, uint64_t> last_by_caller_;
};

}  // namespace manta::core
