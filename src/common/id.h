// Strong, fixed-size binary identifiers (ARCHITECTURE.md §3).
//
// Every ID type is a distinct C++ type over a byte array, so a NodeID can never be
// passed where an ObjectID is expected. IDs print as lowercase hex. Derivations:
//   ActorID  = 12 unique bytes + JobID
//   TaskID   = 8 unique bytes + ActorID (nil actor for normal tasks)
//   ObjectID = TaskID + 4-byte little-endian index
// A child TaskID is a deterministic hash of (parent TaskID, submission counter), so
// re-executing a task recreates the same ObjectIDs. Thread-compatible value types.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace manta {

// Fills `out` with `n` bytes from a process-wide, thread-safe random generator.
void FillRandom(uint8_t* out, size_t n);
// Deterministic 64-bit hash of `data` (stable across processes, builds and hosts).
uint64_t StableHash64(std::string_view data, uint64_t seed = 0);

template <typename Derived, size_t N>
class BaseID {
 public:
  static constexpr size_t kSize = N;

  // The nil ID is all 0xff bytes, like Ray's.
  BaseID() { bytes_.fill(0xff); }

  static Derived Nil() { return Derived(); }
  static Derived FromRandom() {
    Derived id;
    FillRandom(id.bytes_.data(), N);
    return id;
  }
  // REQUIRES: binary.size() == N (CHECKed: a wrong size is a programmer error).
  static Derived FromBinary(std::string_view binary);
  // Returns InvalidArgument for a string that is not exactly N bytes.
  static absl::StatusOr<Derived> FromBinaryChecked(std::string_view binary);
  // Returns InvalidArgument for anything but 2*N hex digits.
  static absl::StatusOr<Derived> FromHex(std::string_view hex);

  bool IsNil() const { return *this == Nil(); }
  std::string Binary() const { return std::string(reinterpret_cast<const char*>(bytes_.data()), N); }
  std::string Hex() const;
  const uint8_t* Data() const { return bytes_.data(); }
  uint8_t* MutableData() { return bytes_.data(); }
  static constexpr size_t Size() { return N; }

  friend bool operator==(const BaseID& a, const BaseID& b) { return a.bytes_ == b.bytes_; }
  friend bool operator!=(const BaseID& a, const BaseID& b) { return !(a == b); }
  friend bool operator<(const BaseID& a, const BaseID& b) { return a.bytes_ < b.bytes_; }

  template <typename H>
  friend H AbslHashValue(H h, const BaseID& id) {
    return H::combine_contiguous(std::move(h), id.bytes_.data(), N);
  }

 protected:
  std::array<uint8_t, N> bytes_;
};

#define MANTA_DEFINE_ID(Name, Size)                          \
  class Name : public BaseID<Name, Size> {                   \
   public:                                                   \
    Name() = default;                                        \
  };

MANTA_DEFINE_ID(NodeID, 28)
MANTA_DEFINE_ID(WorkerID, 28)
MANTA_DEFINE_ID(PlacementGroupID, 18)
MANTA_DEFINE_ID(ClusterID, 28)
MANTA_DEFINE_ID(LeaseID, 28)
#undef MANTA_DEFINE_ID

class JobID : public BaseID<JobID, 4> {
 public:
  JobID() = default;
  // Job ids are allocated by the GCS from a counter starting at 1.
  static JobID FromInt(uint32_t value);
  uint32_t ToInt() const;
};

class TaskID;

class ActorID : public BaseID<ActorID, 16> {
 public:
  static constexpr size_t kUniqueBytes = 12;
  ActorID() = default;
  // A nil actor id that still carries its job, used inside normal-task TaskIDs.
  static ActorID NilFromJob(const JobID& job_id);
  // Unique bytes derived from (parent task, counter), job appended.
  static ActorID Of(const JobID& job_id, const TaskID& parent_task_id, uint64_t counter);
  JobID Job() const;
};

class TaskID : public BaseID<TaskID, 24> {
 public:
  static constexpr size_t kUniqueBytes = 8;
  TaskID() = default;
  // The root task of a driver: random unique bytes.
  static TaskID ForDriver(const JobID& job_id);
  // The n-th task submitted by `parent`: deterministic.
  static TaskID ForNormalTask(const JobID& job_id, const TaskID& parent, uint64_t counter);
  static TaskID ForActorTask(const ActorID& actor_id, const TaskID& parent, uint64_t counter);
  // The task that creates (and re-creates) the actor: one per actor.
  static TaskID ForActorCreationTask(const ActorID& actor_id);
  ActorID Actor() const;
  JobID Job() const;
};

class ObjectID : public BaseID<ObjectID, 28> {
 public:
  // Put objects use indexes from kPutIndexBase upward; task returns use 1..N.
  static constexpr uint32_t kPutIndexBase = 0x80000000u;
  ObjectID() = default;
  static ObjectID FromIndex(const TaskID& task_id, uint32_t index);
  static ObjectID ForPut(const TaskID& task_id, uint32_t put_index);
  TaskID Task() const;
  uint32_t Index() const;
  bool IsPut() const { return Index() >= kPutIndexBase; }
};

template <typename Derived, size_t N>
Derived BaseID<Derived, N>::FromBinary(std::string_view binary) {
  auto id = FromBinaryChecked(binary);
  if (!id.ok()) {
    // A wrong-size binary here is a programmer error: callers at trust boundaries
    // use FromBinaryChecked.
    std::abort();
  }
  return *id;
}

template <typename Derived, size_t N>
absl::StatusOr<Derived> BaseID<Derived, N>::FromBinaryChecked(std::string_view binary) {
  if (binary.size() != N) {
    return absl::InvalidArgumentError("id of " + std::to_string(binary.size()) +
                                      " bytes, expected " + std::to_string(N));
  }
  Derived id;
  std::memcpy(id.bytes_.data(), binary.data(), N);
  return id;
}

std::string BytesToHex(const uint8_t* data, size_t n);
absl::Status HexToBytes(std::string_view hex, uint8_t* out, size_t n);

template <typename Derived, size_t N>
std::string BaseID<Derived, N>::Hex() const {
  return BytesToHex(bytes_.data(), N);
}

template <typename Derived, size_t N>
absl::StatusOr<Derived> BaseID<Derived, N>::FromHex(std::string_view hex) {
  Derived id;
  absl::Status s = HexToBytes(hex, id.bytes_.data(), N);
  if (!s.ok()) return s;
  return id;
}

}  // namespace manta
