// Sort: an Exoshuffle-style distributed sort of gensort-format records, written as a
// Ray C++ user writes one.
//
// Records are 100 bytes, the first 10 the key. Map task i makes its share of the
// records deterministically (from i alone), range-partitions them into R buckets by
// key, and puts each bucket in the object store with ray::Put; it returns the
// buckets' refs (refs nested in a value) with a checksum of what it made. Reduce task
// j gets column j (bucket j of every map), sorts it, and returns a summary. The driver
// then checks what valsort checks: the record count, a checksum that does not depend
// on order (every record's hash, summed), that each partition is sorted, and that the
// partitions are in key order.
//
//   sort [--bytes N] [--maps M] [--reduces R] [--store-bytes S]
//
// --store-bytes sizes the private cluster's object store (default: Manta's), so data
// bigger than the store can be sorted on one machine. Prints the figures and "sorted
// N records correctly" (exit 0), or what was wrong (exit 1).
#include <ray/api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kRecordBytes = 100;
constexpr size_t kKeyBytes = 10;

// splitmix64: a small, fast, deterministic generator.
uint64_t Next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A record's hash, for the order-independent checksum (FNV-1a over its bytes).
uint64_t RecordHash(const uint8_t* record) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < kRecordBytes; ++i) h = (h ^ record[i]) * 0x100000001b3ULL;
  return h;
}

// The bucket of a key: its first two bytes, spread over `reduces` ranges.
size_t BucketOf(const uint8_t* key, size_t reduces) {
  const size_t prefix = (size_t{key[0]} << 8) | key[1];
  return prefix * reduces / 65536;
}

}  // namespace

// What a map task returns: one ref per bucket, and what it made.
struct MapOutput {
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> buckets;
  uint64_t records = 0;
  uint64_t checksum = 0;
  MSGPACK_DEFINE(buckets, records, checksum);
};

// What a reduce task returns about its sorted partition.
struct Partition {
  uint64_t records = 0;
  uint64_t checksum = 0;
  bool sorted = true;
  std::string first_key;
  std::string last_key;
  MSGPACK_DEFINE(records, checksum, sorted, first_key, last_key);
};

// Map: `records` records made from `seed`, partitioned into `reduces` buckets.
MapOutput Map(uint64_t seed, uint64_t records, uint64_t reduces) {
  std::vector<std::vector<uint8_t>> buckets(reduces);
  for (auto& bucket : buckets) bucket.reserve(records / reduces * kRecordBytes * 9 / 8);
  MapOutput out;
  uint64_t state = seed * 0x2545f4914f6cdd1dULL + 1;
  uint8_t record[kRecordBytes];
  for (uint64_t r = 0; r < records; ++r) {
    for (size_t i = 0; i < kRecordBytes; i += 8) {
      const uint64_t word = Next(state);
      std::memcpy(record + i, &word, std::min<size_t>(8, kRecordBytes - i));
    }
    out.checksum += RecordHash(record);
    std::vector<uint8_t>& bucket = buckets[BucketOf(record, reduces)];
    bucket.insert(bucket.end(), record, record + kRecordBytes);
  }
  out.records = records;
  for (auto& bucket : buckets) out.buckets.push_back(ray::Put(bucket));
  return out;
}

// Reduce: the records of one column of buckets, sorted by key.
Partition Reduce(std::vector<ray::ObjectRef<std::vector<uint8_t>>> column) {
  std::vector<std::shared_ptr<std::vector<uint8_t>>> parts = ray::Get(column);
  size_t bytes = 0;
  for (const auto& part : parts) bytes += part->size();
  std::vector<uint8_t> data;
  data.reserve(bytes);
  for (auto& part : parts) {
    data.insert(data.end(), part->begin(), part->end());
    part.reset();
  }
  // Sort an index of the records, then lay them out in order.
  const size_t n = data.size() / kRecordBytes;
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::memcmp(&data[a * kRecordBytes], &data[b * kRecordBytes], kKeyBytes) < 0;
  });
  Partition p;
  p.records = n;
  const uint8_t* previous = nullptr;
  for (uint32_t i : order) {
    const uint8_t* record = &data[size_t{i} * kRecordBytes];
    p.checksum += RecordHash(record);
    if (previous != nullptr && std::memcmp(previous, record, kKeyBytes) > 0) p.sorted = false;
    previous = record;
  }
  if (n > 0) {
    p.first_key.assign(reinterpret_cast<const char*>(&data[size_t{order.front()} * kRecordBytes]), kKeyBytes);
    p.last_key.assign(reinterpret_cast<const char*>(&data[size_t{order.back()} * kRecordBytes]), kKeyBytes);
  }
  return p;
}

RAY_REMOTE(Map, Reduce);

namespace {

uint64_t Flag(int argc, char** argv, const std::string& name, uint64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return std::stoull(argv[i + 1]);
  }
  return fallback;
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t bytes = Flag(argc, argv, "--bytes", uint64_t{256} << 20);
  const uint64_t maps = Flag(argc, argv, "--maps", 8);
  const uint64_t reduces = Flag(argc, argv, "--reduces", 4);
  const uint64_t store_bytes = Flag(argc, argv, "--store-bytes", 0);
  ray::RayConfig config;
  if (store_bytes > 0) config.head_args = {"--object-store-memory=" + std::to_string(store_bytes)};
  ray::Init(config, argc, argv);  // in a worker: serves tasks, never returns

  const uint64_t records_per_map = bytes / kRecordBytes / maps;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ray::ObjectRef<MapOutput>> mapped;
  for (uint64_t m = 0; m < maps; ++m) mapped.push_back(ray::Task(Map).Remote(m, records_per_map, reduces));
  uint64_t made = 0, made_checksum = 0;
  std::vector<std::vector<ray::ObjectRef<std::vector<uint8_t>>>> columns(reduces);
  for (auto& output : ray::Get(mapped)) {
    made += output->records;
    made_checksum += output->checksum;
    for (uint64_t r = 0; r < reduces; ++r) columns[r].push_back(output->buckets[r]);
  }
  std::vector<ray::ObjectRef<Partition>> reduced;
  for (auto& column : columns) reduced.push_back(ray::Task(Reduce).Remote(column));
  columns.clear();
  std::vector<std::shared_ptr<Partition>> partitions = ray::Get(reduced);
  const double seconds = Since(t0);

  uint64_t records = 0, checksum = 0;
  std::string problem;
  for (size_t j = 0; j < partitions.size(); ++j) {
    const Partition& p = *partitions[j];
    records += p.records;
    checksum += p.checksum;
    if (!p.sorted) problem = "partition " + std::to_string(j) + " is not sorted";
    if (j > 0 && partitions[j - 1]->records > 0 && p.records > 0 && partitions[j - 1]->last_key > p.first_key) {
      problem = "partitions " + std::to_string(j - 1) + " and " + std::to_string(j) + " overlap";
    }
  }
  if (records != made) problem = std::to_string(records) + " records sorted, " + std::to_string(made) + " made";
  if (checksum != made_checksum) problem = "the checksum of the sorted records differs from the one made";
  std::printf("%llu bytes in %llu records, %llu maps x %llu reduces, %.2f s (%.3f GB/s)\n",
              static_cast<unsigned long long>(made * kRecordBytes), static_cast<unsigned long long>(made),
              static_cast<unsigned long long>(maps), static_cast<unsigned long long>(reduces), seconds,
              static_cast<double>(made * kRecordBytes) / seconds / 1e9);
  ray::Shutdown();
  if (!problem.empty()) {
    std::printf("sort failed: %s\n", problem.c_str());
    return 1;
  }
  std::printf("sorted %llu records correctly\n", static_cast<unsigned long long>(made));
  return 0;
}
