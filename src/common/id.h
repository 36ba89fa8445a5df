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
  // A derived TaskID's unique bytes (little-endian) end in the low kSequenceBits bits
  // of its submission counter; the bits above are a hash of (parent, counter's block).
  // See IdHash.
  static constexpr int kSequenceBits = 6;
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

namespace id_internal {
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint64_t Fold(uint64_t a, uint64_t b) {
  __uint128_t m = static_cast<__uint128_t>(a ^ b) * 0x9e3779b97f4a7c15ull;
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}
// A hash whose swiss-table position (hash >> 7) is random per `block` and advances by
// one per `pos`, and whose control byte (the low 7 bits) differs across a block.
inline size_t PlaceInBlock(uint64_t block, uint64_t pos) {
  uint64_t h = Fold(block, 0x2d358dccaa6c78a5ull);
  return static_cast<size_t>(((h & ~uint64_t{0x7f}) + (pos << 7)) | (((h >> 57) ^ (pos * 0x25)) & 0x7f));
}
inline uint64_t TaskBlock(const uint8_t* task) {
  return Fold(Fold(Load64(task) >> TaskID::kSequenceBits, Load64(task + 8)), Load64(task + 16));
}
inline uint64_t TaskPos(const uint8_t* task) {
  return Load64(task) & ((uint64_t{1} << TaskID::kSequenceBits) - 1);
}
}  // namespace id_internal

// Hasher for the owner's big tables keyed by TaskID or ObjectID (ARCHITECTURE.md §12).
// Tasks submitted one after another by one parent differ only in their low sequence
// bits (TaskID::kSequenceBits); this hasher puts each block of 64 of them in
// neighbouring slots of an absl swiss table, at a random place per block. The same
// goes for their returns (one block per return index, so a task's many returns never
// crowd each other) and for a run of 64 puts by one task. An owner completes and frees
// tasks in about the order it submitted them, so with a million in flight it walks its
// tables a cache line at a time instead of missing the cache once per table per task.
// IDs with random bytes hash as well as with absl::Hash.
struct IdHash {
  size_t operator()(const TaskID& id) const {
    return id_internal::PlaceInBlock(id_internal::TaskBlock(id.Data()), id_internal::TaskPos(id.Data()));
  }
  size_t operator()(const ObjectID& id) const {
    const uint32_t index = id_internal::Load32(id.Data() + TaskID::kSize);
    const uint64_t task_block = id_internal::TaskBlock(id.Data());
    if (index >= ObjectID::kPutIndexBase) {
      constexpr uint32_t kMask = (1u << TaskID::kSequenceBits) - 1;
      return id_internal::PlaceInBlock(id_internal::Fold(task_block, index >> TaskID::kSequenceBits), index & kMask);
    }
    return id_internal::PlaceInBlock(id_internal::Fold(task_block, index), id_internal::TaskPos(id.Data()));
  }
};

// Aborts with a message naming both sizes and a stack trace (out of line).
[[noreturn]] void DieOfWrongIdSize(size_t size, size_t expected);

// Both are on the task path (every result, return and event row): a plain copy,
// with the error built out of line.
template <typename Derived, size_t N>
Derived BaseID<Derived, N>::FromBinary(std::string_view binary) {
  // A wrong-size binary here is a programmer error: callers at trust boundaries use
  // FromBinaryChecked.
  if (binary.size() != N) [[unlikely]] DieOfWrongIdSize(binary.size(), N);
  Derived id;
  std::memcpy(id.bytes_.data(), binary.data(), N);
  return id;
}

absl::Status WrongIdSize(size_t size, size_t expected);

template <typename Derived, size_t N>
absl::StatusOr<Derived> BaseID<Derived, N>::FromBinaryChecked(std::string_view binary) {
  if (binary.size() != N) [[unlikely]] return WrongIdSize(binary.size(), N);
  Derived id;
  std::memcpy(id.bytes_.data(), binary.data(), N);
  return id;
}

std::string BytesToHex(const uint8_t* data, size_t n);
// Lowercase hex of binary bytes (an id as it travels in a message).
inline std::string BinaryHex(const std::string& binary) {
  return BytesToHex(reinterpret_cast<const uint8_t*>(binary.data()), binary.size());
}
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
