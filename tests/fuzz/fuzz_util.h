// Helpers shared by the bounded randomized ("fuzz") tests of Manta's wire decoders
// (tests/fuzz/*_fuzz_test.cc): a seeded random source, byte-level mutations of valid
// encodings, and a per-thread cap on allocation sizes.
//
// Each test seeds a std::mt19937_64 with TestRng(): $MANTA_FUZZ_SEED (default
// kDefaultSeed) mixed with the test's name, and prints the seed and the iteration
// count, so a failure is replayed exactly with
//   MANTA_FUZZ_SEED=<seed> MANTA_FUZZ_ITERATIONS=<n> ./<test binary> --gtest_filter=<test>
// $MANTA_FUZZ_ITERATIONS replaces the iteration count of every randomized loop (run
// longer to search, shorter to bisect). Single-threaded unless a function says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>

namespace google::protobuf {
class LogSilencer;
}  // namespace google::protobuf

namespace manta::fuzz {

inline constexpr uint64_t kDefaultSeed = 0x6d616e7461ull;  // "manta"

// $MANTA_FUZZ_ITERATIONS when set (and positive), else `default_iterations`.
int64_t Iterations(int64_t default_iterations);

// A generator for the running gtest test, seeded from $MANTA_FUZZ_SEED (or
// kDefaultSeed) and the test's name. Prints the seed and `iterations` for replay.
std::mt19937_64 TestRng(int64_t iterations);

// A uniform integer in [lo, hi].
uint64_t Uniform(std::mt19937_64& rng, uint64_t lo, uint64_t hi);
// True with probability 1/n.
bool OneIn(std::mt19937_64& rng, uint64_t n);

// Up to `max_size` random bytes; short strings are as likely as long ones.
std::string RandomBytes(std::mt19937_64& rng, size_t max_size);

// A value that length and size fields get wrong in practice, around `limit` (the
// decoder's bound for that field) and around the integer widths: 0, 1, limit - 1,
// limit, limit + 1, 2^31 - 1, 2^32 - 1, INT64_MAX, UINT64_MAX and their neighbours.
uint64_t BoundaryValue(std::mt19937_64& rng, uint64_t limit);

// Writes the low `width` bytes of `value` little-endian at `pos` (clipped to the
// string's end): how the frame headers of the task channel and store carry lengths.
void PutLe(std::string* bytes, size_t pos, int width, uint64_t value);
// Appends `value` as a protobuf / LEB128 varint.
void PutVarint(std::string* out, uint64_t value);

// Applies one to four random edits to `bytes`: bit flips, boundary bytes, a boundary
// integer written over 1/2/4/8 bytes, deleting, duplicating or inserting a span,
// truncating, or splicing in part of `donor` (another valid encoding, may be empty).
std::string Mutate(std::mt19937_64& rng, std::string bytes, std::string_view donor = {});

// Lower-case hex of the first `max_bytes` bytes, for failure messages.
std::string Hex(std::string_view bytes, size_t max_bytes = 64);

// While alive, glog shows errors only and protobuf's parser is silent: the decoders
// log every input they refuse, and these tests refuse thousands. Not thread-safe
// (glog's flag): create it before the threads that log.
class QuietLogs {
 public:
  QuietLogs();
  ~QuietLogs();
  QuietLogs(const QuietLogs&) = delete;
  QuietLogs& operator=(const QuietLogs&) = delete;

 private:
  int saved_min_log_level_;
  std::unique_ptr<google::protobuf::LogSilencer> protobuf_silencer_;
};

// While alive, a single allocation larger than `max_bytes` requested on this thread
// (operator new or malloc) fails, with std::bad_alloc or nullptr, and is counted.
// A decoder that reserves what a length field claims instead of what arrived thus
// fails its test instead of taking the machine's memory. Other threads are not
// capped. Caps nest; the innermost one applies. calloc/realloc are not capped, and
// under AddressSanitizer nothing is (its allocator must see every call).
class AllocationCap {
 public:
  explicit AllocationCap(size_t max_bytes);
  ~AllocationCap();
  AllocationCap(const AllocationCap&) = delete;
  AllocationCap& operator=(const AllocationCap&) = delete;

  // Allocations refused since construction.
  int64_t refused() const { return refused_; }
  // The largest single size requested (refused or not).
  size_t largest_request() const { return largest_; }

 private:
  friend bool CapRefuses(size_t size);
  size_t max_bytes_;
  size_t largest_ = 0;
  int64_t refused_ = 0;
  AllocationCap* previous_;
};

}  // namespace manta::fuzz
