// Sort: an Exoshuffle-style distributed sort of gensort-format records, written as a
// Ray C++ user writes one (the records and tasks are in sort_tasks.h).
//
// Map task i makes its share of the 100-byte records, partitions them by key into R
// buckets and puts each bucket with ray::Put, returning the buckets' refs; reduce
// task j gets column j (bucket j of every map) and sorts it. The driver then checks
// what valsort checks: the record count, a checksum that does not depend on order
// (every record's hash, summed), that each partition is sorted, and that the
// partitions are in key order.
//
//   sort [--bytes N] [--maps M] [--reduces R] [--store-bytes S]
//
// --store-bytes sizes the private cluster's object store (default: Manta's), so data
// bigger than the store can be sorted on one machine. Prints the figures and "sorted
// N records correctly" (exit 0), or what was wrong (exit 1).
#include <ray/api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sort_tasks.h"

using sort_example::CheckPartitions;
using sort_example::Map;
using sort_example::MapOutput;
using sort_example::Partition;
using sort_example::Reduce;
using sort_example::kRecordBytes;

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

  std::vector<const Partition*> in_order;
  for (const auto& p : partitions) in_order.push_back(p.get());
  const std::string problem = CheckPartitions(in_order, made, made_checksum);
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
