#include "tests/fuzz/fuzz_util.h"

#include <glog/logging.h>
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>

namespace manta::fuzz {
namespace {

// The innermost cap alive on this thread. initial-exec: read from malloc, so its
// access must never allocate.
__attribute__((tls_model("initial-exec"))) thread_local AllocationCap* tls_cap = nullptr;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 0);
  return end != nullptr && *end == '\0' ? value : fallback;
}

uint64_t Fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

bool CapRefuses(size_t size) {
  AllocationCap* cap = tls_cap;
  if (cap == nullptr) return false;
  if (size > cap->largest_) cap->largest_ = size;
  if (size <= cap->max_bytes_) return false;
  ++cap->refused_;
  return true;
}

QuietLogs::QuietLogs()
    : saved_min_log_level_(FLAGS_minloglevel), protobuf_silencer_(std::make_unique<google::protobuf::LogSilencer>()) {
  FLAGS_minloglevel = google::GLOG_ERROR;
}
QuietLogs::~QuietLogs() { FLAGS_minloglevel = saved_min_log_level_; }

AllocationCap::AllocationCap(size_t max_bytes) : max_bytes_(max_bytes), previous_(tls_cap) { tls_cap = this; }
AllocationCap::~AllocationCap() { tls_cap = previous_; }

int64_t Iterations(int64_t default_iterations) {
  uint64_t n = EnvU64("MANTA_FUZZ_ITERATIONS", 0);
  return n > 0 ? static_cast<int64_t>(n) : default_iterations;
}

std::mt19937_64 TestRng(int64_t iterations) {
  const uint64_t seed = EnvU64("MANTA_FUZZ_SEED", kDefaultSeed);
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "";
  std::printf("[ fuzz     ] %s: MANTA_FUZZ_SEED=%llu MANTA_FUZZ_ITERATIONS=%lld\n", name.c_str(),
              static_cast<unsigned long long>(seed), static_cast<long long>(iterations));
  std::fflush(stdout);
  ::testing::Test::RecordProperty("fuzz_seed", std::to_string(seed));
  return std::mt19937_64(seed ^ Fnv1a(name));
}

uint64_t Uniform(std::mt19937_64& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

bool OneIn(std::mt19937_64& rng, uint64_t n) { return Uniform(rng, 1, n) == 1; }

std::string RandomBytes(std::mt19937_64& rng, size_t max_size) {
  // A random bit width first: short inputs (where headers are cut) are common.
  const uint64_t width = Uniform(rng, 0, std::min(63, 64 - __builtin_clzll(static_cast<uint64_t>(max_size) | 1)));
  const uint64_t size = std::min<uint64_t>(max_size, Uniform(rng, 0, (uint64_t{1} << width) - 1));
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) PutLe(&out, i, 8, rng());
  return out;
}

uint64_t BoundaryValue(std::mt19937_64& rng, uint64_t limit) {
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  const uint64_t bases[] = {0,
                            1,
                            limit,
                            uint64_t{std::numeric_limits<int32_t>::max()},
                            uint64_t{std::numeric_limits<uint32_t>::max()},
                            uint64_t{std::numeric_limits<int64_t>::max()},
                            kMax64,
                            uint64_t{1} << 20,
                            uint64_t{1} << 24,
                            uint64_t{1} << 62};
  const uint64_t base = bases[Uniform(rng, 0, std::size(bases) - 1)];
  switch (Uniform(rng, 0, 3)) {
    case 0:
      return base - 1;  // wraps at 0 on purpose: UINT64_MAX
    case 1:
      return base + 1;
    default:
      return base;
  }
}

void PutLe(std::string* bytes, size_t pos, int width, uint64_t value) {
  for (int i = 0; i < width && pos + i < bytes->size(); ++i) {
    (*bytes)[pos + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
}

void PutVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

std::string Mutate(std::mt19937_64& rng, std::string bytes, std::string_view donor) {
  const int edits = static_cast<int>(Uniform(rng, 1, 4));
  for (int e = 0; e < edits; ++e) {
    const size_t size = bytes.size();
    const size_t pos = size == 0 ? 0 : Uniform(rng, 0, size - 1);
    switch (Uniform(rng, 0, 8)) {
      case 0:  // flip a bit
        if (size > 0) bytes[pos] = static_cast<char>(bytes[pos] ^ (1 << Uniform(rng, 0, 7)));
        break;
      case 1: {  // a boundary byte
        static constexpr unsigned char kBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
        if (size > 0) bytes[pos] = static_cast<char>(kBytes[Uniform(rng, 0, std::size(kBytes) - 1)]);
        break;
      }
      case 2: {  // a boundary integer over a (length) field
        static constexpr int kWidths[] = {1, 2, 4, 8};
        PutLe(&bytes, pos, kWidths[Uniform(rng, 0, 3)], BoundaryValue(rng, Uniform(rng, 0, 1 << 16)));
        break;
      }
      case 3:  // delete a span
        if (size > 0) bytes.erase(pos, Uniform(rng, 1, std::min<size_t>(size - pos, 64)));
        break;
      case 4:  // duplicate a span
        if (size > 0) bytes.insert(pos, bytes.substr(pos, Uniform(rng, 1, std::min<size_t>(size - pos, 64))));
        break;
      case 5:  // insert random bytes
        bytes.insert(pos, RandomBytes(rng, 16));
        break;
      case 6:  // truncate
        bytes.resize(size == 0 ? 0 : Uniform(rng, 0, size - 1));
        break;
      case 7: {  // splice in part of another encoding
        if (donor.empty()) break;
        const size_t from = Uniform(rng, 0, donor.size() - 1);
        const size_t n = Uniform(rng, 1, donor.size() - from);
        bytes.replace(pos, Uniform(rng, 0, size - pos), donor.substr(from, n));
        break;
      }
      default:  // a random byte
        if (size > 0) bytes[pos] = static_cast<char>(rng());
        break;
    }
  }
  return bytes;
}

std::string Hex(std::string_view bytes, size_t max_bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
    out.push_back(kDigits[static_cast<unsigned char>(bytes[i]) >> 4]);
    out.push_back(kDigits[static_cast<unsigned char>(bytes[i]) & 15]);
  }
  if (bytes.size() > max_bytes) out += "...(" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

}  // namespace manta::fuzz

// The cap sits in front of glibc's allocator: malloc and the global operator new
// (which the C++ runtime's array, nothrow and sized forms call) check it, then
// allocate as usual, so free and operator delete need no replacement. Under
// AddressSanitizer, whose allocator must see every allocation, there is no cap
// (ASAN_OPTIONS=max_allocation_size_mb=... does the same job there).
#if !defined(__SANITIZE_ADDRESS__)
extern "C" void* __libc_malloc(size_t size);

extern "C" void* malloc(size_t size) {
  if (manta::fuzz::CapRefuses(size)) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(size);
}

void* operator new(size_t size) {
  if (void* p = malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
#endif  // !__SANITIZE_ADDRESS__
