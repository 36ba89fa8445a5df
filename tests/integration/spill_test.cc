// More data than the object store holds, through the public API (#include
// <ray/api.h>) on a real private cluster whose store holds 128 MiB: puts wait for
// spilling instead of failing, every object comes back with its bytes, tasks read
// objects restored for them, and a Get of more than the store can hold fails at once
// with the sizes. This binary is also its own worker.
#include <ray/api.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace spill_test {
namespace {

constexpr int64_t kStoreBytes = 128 << 20;
constexpr size_t kBlockBytes = 16 << 20;  // eight fill the store

// A block whose every byte depends on its seed and position.
std::vector<uint8_t> MakeBlock(int seed) {
  std::vector<uint8_t> block(kBlockBytes);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(seed * 131 + i * 7 + (i >> 12));
  return block;
}

bool IsBlock(const std::vector<uint8_t>& block, int seed) { return block == MakeBlock(seed); }

// Checks every block of `blocks` (seeds first_seed, first_seed + 1, ...): a task
// reading objects restored for it while others are spilled.
int CountGoodBlocks(std::vector<ray::ObjectRef<std::vector<uint8_t>>> blocks, int first_seed) {
  int good = 0;
  for (size_t i = 0; i < blocks.size(); ++i) good += IsBlock(*ray::Get(blocks[i]), first_seed + static_cast<int>(i));
  return good;
}

std::vector<uint8_t> MakeBlockTask(int seed) { return MakeBlock(seed); }

RAY_REMOTE(CountGoodBlocks, MakeBlockTask);

class SpillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ray::RayConfig config;
    config.head_args = {"--num-cpus=2", "--object-store-memory=" + std::to_string(kStoreBytes)};
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }
};

// 32 blocks of 16 MiB (four times the store) put by the driver, which keeps every
// ref: each Put waits for spilling instead of failing, and each block reads back.
TEST_F(SpillTest, PutsOfFourTimesTheStoreWaitForSpillingAndAllComeBack) {
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> refs;
  for (int i = 0; i < 32; ++i) refs.push_back(ray::Put(MakeBlock(i)));
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(IsBlock(*ray::Get(refs[i]), i)) << "block " << i;
}

// Tasks make the blocks (owned by the driver, as returns), and two tasks at once
// read half each, in order, while the other half is spilled under them.
TEST_F(SpillTest, TasksReadBlocksRestoredForThemWhileOthersAreSpilled) {
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> made;
  for (int i = 0; i < 24; ++i) made.push_back(ray::Task(MakeBlockTask).Remote(100 + i));
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> first(made.begin(), made.begin() + 12);
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> second(made.begin() + 12, made.end());
  auto a = ray::Task(CountGoodBlocks).Remote(first, 100);
  auto b = ray::Task(CountGoodBlocks).Remote(second, 112);
  EXPECT_EQ(*a.Get(), 12);
  EXPECT_EQ(*b.Get(), 12);
}

// A Get of several blocks at once restores them all and returns them together.
TEST_F(SpillTest, AGetOfSeveralSpilledBlocksReturnsThemAll) {
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> refs;
  for (int i = 0; i < 16; ++i) refs.push_back(ray::Put(MakeBlock(200 + i)));
  // The first four were pushed to disk by the last ones; get them together.
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> early(refs.begin(), refs.begin() + 4);
  auto blocks = ray::Get(early);
  ASSERT_EQ(blocks.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(IsBlock(*blocks[i], 200 + i)) << "block " << i;
}

// Ten blocks (160 MiB) cannot be held by a 128 MiB store at once: the Get fails at
// once with the sizes instead of waiting for ever.
TEST_F(SpillTest, AGetLargerThanTheStoreFailsAtOnceNamingTheSizes) {
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> refs;
  for (int i = 0; i < 10; ++i) refs.push_back(ray::Put(MakeBlock(300 + i)));
  auto start = std::chrono::steady_clock::now();
  try {
    ray::Get(refs);
    FAIL() << "a Get of 160 MiB through a 128 MiB store returned";
  } catch (const ray::internal::RayException& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("10 objects"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(kStoreBytes) + " bytes"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Each of them is still readable on its own.
  EXPECT_TRUE(IsBlock(*ray::Get(refs[9]), 309));
  EXPECT_TRUE(IsBlock(*ray::Get(refs[0]), 300));
}

}  // namespace
}  // namespace spill_test
