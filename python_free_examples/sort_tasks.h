// The records, tasks and checks of the sort example (sort.cc) and of its benchmark
// (bench/sort_bench.cc). Include it in one source file of a program: it registers
// Map and Reduce (RAY_REMOTE).
//
// Records are 100 bytes, the first 10 the key. Map task i makes its share of the
// records deterministically (from i alone), range-partitions them into R buckets by
// key, and puts each bucket in the object store with ray::Put; it returns the
// buckets' refs (refs nested in a value) with a checksum of what it made. Reduce task
// j gets column j (bucket j of every map), sorts it, and returns a summary.
#pragma once

#include <ray/api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace sort_example {

constexpr size_t kRecordBytes = 100;
constexpr size_t kKeyBytes = 10;

// splitmix64: a small, fast, deterministic generator.
inline uint64_t Next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A record's hash, for the order-independent checksum (FNV-1a over its bytes).
inline uint64_t RecordHash(const uint8_t* record) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < kRecordBytes; ++i) h = (h ^ record[i]) * 0x100000001b3ULL;
  return h;
}

// The bucket of a key: its first two bytes, spread over `reduces` ranges.
inline size_t BucketOf(const uint8_t* key, size_t reduces) {
  const size_t prefix = (size_t{key[0]} << 8) | key[1];
  return prefix * reduces / 65536;
}

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

// `records` records made from `seed`, range-partitioned into `reduces` buckets;
// adds each record's hash to *checksum.
inline std::vector<std::vector<uint8_t>> MakeBuckets(uint64_t seed, uint64_t records, uint64_t reduces,
                                                     uint64_t* checksum) {
  std::vector<std::vector<uint8_t>> buckets(reduces);
  for (auto& bucket : buckets) bucket.reserve(records / reduces * kRecordBytes * 9 / 8);
  uint64_t state = seed * 0x2545f4914f6cdd1dULL + 1;
  uint8_t record[kRecordBytes];
  for (uint64_t r = 0; r < records; ++r) {
    for (size_t i = 0; i < kRecordBytes; i += 8) {
      const uint64_t word = Next(state);
      std::memcpy(record + i, &word, std::min<size_t>(8, kRecordBytes - i));
    }
    *checksum += RecordHash(record);
    std::vector<uint8_t>& bucket = buckets[BucketOf(record, reduces)];
    bucket.insert(bucket.end(), record, record + kRecordBytes);
  }
  return buckets;
}

// Map: the buckets of map task `seed`, each put in the object store.
inline MapOutput Map(uint64_t seed, uint64_t records, uint64_t reduces) {
  MapOutput out;
  out.records = records;
  for (auto& bucket : MakeBuckets(seed, records, reduces, &out.checksum)) out.buckets.push_back(ray::Put(bucket));
  return out;
}

// The records of one column of buckets, sorted by key, summed up. Each part is let
// go once copied.
inline Partition SortColumn(std::vector<std::shared_ptr<std::vector<uint8_t>>> parts) {
  size_t bytes = 0;
  for (const auto& part : parts) bytes += part->size();
  std::vector<uint8_t> data;
  data.reserve(bytes);
  for (auto& part : parts) {
    data.insert(data.end(), part->begin(), part->end());
    part.reset();
  }
  // Sort an index of the records by key.
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

// Reduce: column `j` (bucket j of every map), sorted.
inline Partition Reduce(std::vector<ray::ObjectRef<std::vector<uint8_t>>> column) {
  return SortColumn(ray::Get(column));
}

// What valsort checks, over the partitions in order: "" when all is right.
inline std::string CheckPartitions(const std::vector<const Partition*>& partitions, uint64_t made,
                                   uint64_t made_checksum) {
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
  return problem;
}

}  // namespace sort_example

RAY_REMOTE(sort_example::Map, sort_example::Reduce);
