// A 400 KB value for tests: larger than the inline limits (100 KiB), so it travels
// through the object store. Shared by the public-API integration tests.
#pragma once

#include <array>
#include <numeric>

namespace manta::testing {

using Big = std::array<int, 100000>;

inline Big MakeBig(int seed) {
  Big b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = seed + static_cast<int>(i);
  return b;
}

inline long long SumBig(Big b) { return std::accumulate(b.begin(), b.end(), 0LL); }

}  // namespace manta::testing
