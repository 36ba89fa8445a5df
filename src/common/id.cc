#include "src/common/id.h"

#include <glog/logging.h>

#include <cstdlib>
#include <mutex>
#include <random>

namespace manta {
namespace {

uint64_t Mix64(uint64_t x) {
  // splitmix64 finaliser: full avalanche, so nearby counters give unrelated bytes.
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void PutLE64(uint8_t* out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (i % 8)));
}

// Fills n bytes deterministically from a seed string.
void DeriveBytes(std::string_view seed, uint8_t* out, size_t n) {
  for (size_t off = 0; off < n; off += 8) {
    uint64_t h = StableHash64(seed, off);
    size_t take = std::min<size_t>(8, n - off);
    PutLE64(out + off, h, take);
  }
}

}  // namespace

void FillRandom(uint8_t* out, size_t n) {
  static std::mutex mu;
  static std::mt19937_64 gen([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }());
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = gen();
    PutLE64(out + i, v, std::min<size_t>(8, n - i));
  }
}

uint64_t StableHash64(std::string_view data, uint64_t seed) {
  // FNV-1a over the bytes, then a strong finaliser.
  uint64_t h = 0xcbf29ce484222325ull ^ Mix64(seed);
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return Mix64(h ^ data.size());
}

void DieOfWrongIdSize(size_t size, size_t expected) {
  LOG(FATAL) << "an id of " << size << " bytes where " << expected
             << " were expected (BaseID::FromBinary: a caller must check untrusted bytes with FromBinaryChecked)";
  std::abort();  // not reached
}

absl::Status WrongIdSize(size_t size, size_t expected) {
  return absl::InvalidArgumentError("id of " + std::to_string(size) + " bytes, expected " + std::to_string(expected));
}

std::string BytesToHex(const uint8_t* data, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

absl::Status HexToBytes(std::string_view hex, uint8_t* out, size_t n) {
  if (hex.size() != 2 * n) {
    return absl::InvalidArgumentError("hex id of " + std::to_string(hex.size()) +
                                      " digits, expected " + std::to_string(2 * n));
  }
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < n; ++i) {
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("non-hex digit in id");
    out[i] = static_cast<uint8_t>((hi << 4) | lo);
  }
  return absl::OkStatus();
}

JobID JobID::FromInt(uint32_t value) {
  JobID id;
  for (size_t i = 0; i < kSize; ++i) id.bytes_[i] = static_cast<uint8_t>(value >> (8 * i));
  return id;
}

uint32_t JobID::ToInt() const {
  uint32_t v = 0;
  for (size_t i = 0; i < kSize; ++i) v |= static_cast<uint32_t>(bytes_[i]) << (8 * i);
  return v;
}

ActorID ActorID::NilFromJob(const JobID& job_id) {
  ActorID id;  // all 0xff
  std::memcpy(id.bytes_.data() + kUniqueBytes, job_id.Data(), JobID::kSize);
  return id;
}

ActorID ActorID::Of(const JobID& job_id, const TaskID& parent_task_id, uint64_t counter) {
  ActorID id;
  std::string seed = "actor:" + parent_task_id.Binary() + std::to_string(counter);
  DeriveBytes(seed, id.bytes_.data(), kUniqueBytes);
  std::memcpy(id.bytes_.data() + kUniqueBytes, job_id.Data(), JobID::kSize);
  return id;
}

JobID ActorID::Job() const {
  return JobID::FromBinary(std::string_view(reinterpret_cast<const char*>(bytes_.data()) + kUniqueBytes,
                                            JobID::kSize));
}

TaskID TaskID::ForDriver(const JobID& job_id) {
  TaskID id;
  FillRandom(id.bytes_.data(), kUniqueBytes);
  ActorID nil_actor = ActorID::NilFromJob(job_id);
  std::memcpy(id.bytes_.data() + kUniqueBytes, nil_actor.Data(), ActorID::kSize);
  return id;
}

TaskID TaskID::ForNormalTask(const JobID& job_id, const TaskID& parent, uint64_t counter) {
  return ForActorTask(ActorID::NilFromJob(job_id), parent, counter);
}

TaskID TaskID::ForActorTask(const ActorID& actor_id, const TaskID& parent, uint64_t counter) {
  TaskID id;
  constexpr uint64_t kMask = (uint64_t{1} << kSequenceBits) - 1;
  uint8_t seed[5 + kSize + 8];
  std::memcpy(seed, "task:", 5);
  std::memcpy(seed + 5, parent.Data(), kSize);
  PutLE64(seed + 5 + kSize, counter >> kSequenceBits, 8);
  uint64_t block = StableHash64(std::string_view(reinterpret_cast<const char*>(seed), sizeof(seed)));
  PutLE64(id.bytes_.data(), (block << kSequenceBits) | (counter & kMask), kUniqueBytes);
  std::memcpy(id.bytes_.data() + kUniqueBytes, actor_id.Data(), ActorID::kSize);
  return id;
}

TaskID TaskID::ForActorCreationTask(const ActorID& actor_id) {
  TaskID id;
  DeriveBytes("creation:" + actor_id.Binary(), id.bytes_.data(), kUniqueBytes);
  std::memcpy(id.bytes_.data() + kUniqueBytes, actor_id.Data(), ActorID::kSize);
  return id;
}

ActorID TaskID::Actor() const {
  return ActorID::FromBinary(std::string_view(reinterpret_cast<const char*>(bytes_.data()) + kUniqueBytes,
                                              ActorID::kSize));
}

JobID TaskID::Job() const { return Actor().Job(); }

ObjectID ObjectID::FromIndex(const TaskID& task_id, uint32_t index) {
  ObjectID id;
  std::memcpy(id.bytes_.data(), task_id.Data(), TaskID::kSize);
  for (size_t i = 0; i < 4; ++i) id.bytes_[TaskID::kSize + i] = static_cast<uint8_t>(index >> (8 * i));
  return id;
}

ObjectID ObjectID::ForPut(const TaskID& task_id, uint32_t put_index) {
  return FromIndex(task_id, kPutIndexBase + put_index);
}

TaskID ObjectID::Task() const {
  return TaskID::FromBinary(std::string_view(reinterpret_cast<const char*>(bytes_.data()), TaskID::kSize));
}

uint32_t ObjectID::Index() const {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes_[TaskID::kSize + i]) << (8 * i);
  return v;
}

}  // namespace manta
