// Sort: an Exoshuffle-style distributed sort of gensort-format records (the records
// and tasks are in sort_tasks.h).
//
// Map task i makes its share of the 100-byte records and partitions them by key into
// R buckets; reduce task j gets column j (bucket j of every map) and sorts it. The
// driver then checks what valsort checks: the record count, a checksum that does not
// depend on order (every record's hash, summed), that each partition is sorted, and
// that the partitions are in key order.
//
//   sort [--bytes N] [--maps M] [--reduces R] [--store-bytes S] [--ray-style]
//
// By default the maps return their buckets as objects of their own (ray::Returns,
// rebuilt from lineage if lost) and the reduces read them in place (ray::GetView);
// --ray-style runs the same sort as Ray's C++ API allows: buckets put with ray::Put
// inside the maps, reduces copying them out with ray::Get. --store-bytes sizes the
// private cluster's object store (default: Manta's), so data bigger than the store
// can be sorted on one machine. Prints the figures and "sorted N records correctly"
// (exit 0), or what was wrong (exit 1).
#include <ray/api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sort_tasks.h"

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
  bool ray_style = false;
  for (int i = 1; i < argc; ++i) ray_style |= std::string(argv[i]) == "--ray-style";
  ray::RayConfig config;
  if (store_bytes > 0) config.head_args = {"--object-store-memory=" + std::to_string(store_bytes)};
  ray::Init(config, argc, argv);  // in a worker: serves tasks, never returns

  const auto t0 = std::chrono::steady_clock::now();
  uint64_t made = 0;
  double map_s = 0;
  const std::string problem =
      sort_example::RunSort(maps, bytes / kRecordBytes / maps, reduces, ray_style, &made, &map_s);
  const double seconds = Since(t0);
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
