// The records, tasks and checks of the sort example (sort.cc) and of its benchmark
// (bench/sort_bench.cc). Include it in one source file of a program: it registers
// the tasks (RAY_REMOTE).
//
// Records are 100 bytes, the first 10 the key. Map task i makes its share of the
// records deterministically (from i alone) and range-partitions them into R buckets
// by key; reduce task j sorts column j (bucket j of every map) and returns a summary.
// The tasks come in two styles:
// - Manta's (MapReturns, ReduceViews): a map returns its R buckets as R objects of
//   its own (ray::Returns), plus a summary of what it made; the caller owns them, so a
//   bucket lost with its node is made again by running its map again. A reduce reads
//   its column where it lies in the object store (ray::GetView), with no copy.
// - Ray's C++ API's (Map, Reduce): a map puts each bucket with ray::Put and returns
//   their refs in a struct (the map's worker owns them); a reduce copies its column
//   out with ray::Get.
#pragma once

#include <ray/api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
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

// Map (Ray's style): the buckets of map task `seed`, each put in the object store.
inline MapOutput Map(uint64_t seed, uint64_t records, uint64_t reduces) {
  MapOutput out;
  out.records = records;
  for (auto& bucket : MakeBuckets(seed, records, reduces, &out.checksum)) out.buckets.push_back(ray::Put(bucket));
  return out;
}

// The records of one column of buckets (read in place), sorted by key, summed up.
inline Partition SortColumn(const std::vector<std::span<const uint8_t>>& parts) {
  // Sort (first 8 key bytes as a number, record) pairs: most comparisons end at the
  // number, and the records themselves never move.
  struct Entry {
    uint64_t prefix;
    const uint8_t* record;
  };
  size_t n = 0;
  for (const auto& part : parts) n += part.size() / kRecordBytes;
  std::vector<Entry> order;
  order.reserve(n);
  for (const auto& part : parts) {
    for (size_t at = 0; at + kRecordBytes <= part.size(); at += kRecordBytes) {
      uint64_t prefix = 0;
      for (size_t i = 0; i < 8; ++i) prefix = (prefix << 8) | part[at + i];
      order.push_back({prefix, part.data() + at});
    }
  }
  std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return std::memcmp(a.record + 8, b.record + 8, kKeyBytes - 8) < 0;
  });
  Partition p;
  p.records = n;
  const uint8_t* previous = nullptr;
  for (const Entry& e : order) {
    p.checksum += RecordHash(e.record);
    if (previous != nullptr && std::memcmp(previous, e.record, kKeyBytes) > 0) p.sorted = false;
    previous = e.record;
  }
  if (n > 0) {
    p.first_key.assign(reinterpret_cast<const char*>(order.front().record), kKeyBytes);
    p.last_key.assign(reinterpret_cast<const char*>(order.back().record), kKeyBytes);
  }
  return p;
}

// Reduce (Ray's style): column `j` (bucket j of every map), copied out and sorted.
inline Partition Reduce(std::vector<ray::ObjectRef<std::vector<uint8_t>>> column) {
  std::vector<std::shared_ptr<std::vector<uint8_t>>> values = ray::Get(column);
  std::vector<std::span<const uint8_t>> parts;
  for (const auto& value : values) parts.push_back(*value);
  return SortColumn(parts);
}

// MapReturns (Manta's style): the `reduces` buckets of map task `seed`, each its
// own return, then (return `reduces`) what the map made as a MapSummary's bytes.
struct MapSummary {
  uint64_t records = 0;
  uint64_t checksum = 0;
};
inline ray::Returns<std::vector<uint8_t>> MapReturns(uint64_t seed, uint64_t records, uint64_t reduces) {
  MapSummary made{records, 0};
  ray::Returns<std::vector<uint8_t>> out = MakeBuckets(seed, records, reduces, &made.checksum);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&made);
  out.emplace_back(bytes, bytes + sizeof(made));
  return out;
}
inline MapSummary SummaryOf(const std::vector<uint8_t>& bytes) {
  MapSummary made;
  if (bytes.size() == sizeof(made)) std::memcpy(&made, bytes.data(), sizeof(made));
  return made;
}

// ReduceViews (Manta's style): column `j` sorted where it lies in the object store.
inline Partition ReduceViews(std::vector<ray::ObjectRef<std::vector<uint8_t>>> column) {
  std::vector<ray::ObjectView<uint8_t>> views = ray::GetView(column);
  std::vector<std::span<const uint8_t>> parts;
  for (const auto& view : views) parts.push_back(view.span());
  return SortColumn(parts);
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

// The driver's part: runs the maps and the reduces of a sort of `maps` x
// `records_per_map` records into `reduces` partitions, in one of the two styles, and
// checks the result: "" when it is right, else what was wrong. Sets *made to the
// records made and *map_s to the seconds until every map was done, and calls
// `maps_done` (when given) at that moment, while the reduces run.
inline std::string RunSort(uint64_t maps, uint64_t records_per_map, uint64_t reduces, bool ray_style,
                           uint64_t* made, double* map_s, const std::function<void()>& maps_done = {}) {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t made_checksum = 0;
  *made = 0;
  std::vector<std::vector<ray::ObjectRef<std::vector<uint8_t>>>> columns(reduces);
  std::vector<ray::ObjectRef<Partition>> reduced;
  if (ray_style) {
    std::vector<ray::ObjectRef<MapOutput>> mapped;
    for (uint64_t m = 0; m < maps; ++m) mapped.push_back(ray::Task(Map).Remote(m, records_per_map, reduces));
    for (auto& output : ray::Get(mapped)) {
      *made += output->records;
      made_checksum += output->checksum;
      for (uint64_t r = 0; r < reduces; ++r) columns[r].push_back(output->buckets[r]);
    }
    *map_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& column : columns) reduced.push_back(ray::Task(Reduce).Remote(column));
    if (maps_done) maps_done();
  } else {
    // Each map returns its buckets and its summary; each reduce is submitted at once
    // and starts when its column is made.
    std::vector<ray::ObjectRef<std::vector<uint8_t>>> summaries;
    for (uint64_t m = 0; m < maps; ++m) {
      auto out = ray::Task(MapReturns).SetNumReturns(static_cast<int>(reduces) + 1).Remote(m, records_per_map, reduces);
      for (uint64_t r = 0; r < reduces; ++r) columns[r].push_back(out[r]);
      summaries.push_back(out[reduces]);
    }
    for (auto& column : columns) reduced.push_back(ray::Task(ReduceViews).Remote(column));
    for (const auto& summary : ray::Get(summaries)) {
      *made += SummaryOf(*summary).records;
      made_checksum += SummaryOf(*summary).checksum;
    }
    *map_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (maps_done) maps_done();
  }
  columns.clear();  // the reduces hold their columns; each goes when its reduce is done
  std::vector<std::shared_ptr<Partition>> partitions = ray::Get(reduced);
  std::vector<const Partition*> in_order;
  for (const auto& p : partitions) in_order.push_back(p.get());
  return CheckPartitions(in_order, *made, made_checksum);
}

}  // namespace sort_example

RAY_REMOTE(sort_example::Map, sort_example::Reduce, sort_example::MapReturns, sort_example::ReduceViews);
