// FileSpiller on a real temporary directory: one file per batch, byte-exact restore,
// file removal with the last object, and the errors of a full disk, an unusable
// directory and a damaged file. The loop is driven by the test; disk work runs on the
// spiller's pool, so every wait has a deadline.
#include "src/object_store/spiller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util/test_util.h"

namespace manta::object_store {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class FileSpillerTest : public ::testing::Test {
 protected:
  // Spills `objects` as one batch and waits for the result.
  absl::StatusOr<std::vector<SpillLocation>> Spill(FileSpiller& spiller, const std::vector<std::string>& objects) {
    std::vector<SpillItem> items;
    for (const std::string& o : objects) {
      items.push_back({ObjectID::FromRandom(), reinterpret_cast<const uint8_t*>(o.data()),
                       static_cast<int64_t>(o.size())});
    }
    std::optional<absl::StatusOr<std::vector<SpillLocation>>> result;
    spiller.SpillAsync(std::move(items), [&](absl::StatusOr<std::vector<SpillLocation>> r) { result = std::move(r); });
    if (!RunUntil([&] { return result.has_value(); })) return absl::DeadlineExceededError("spill did not finish");
    return *std::move(result);
  }
  absl::StatusOr<std::string> Restore(FileSpiller& spiller, const SpillLocation& location) {
    std::string bytes(static_cast<size_t>(location.size), '\0');
    std::optional<absl::Status> result;
    spiller.RestoreAsync(location, reinterpret_cast<uint8_t*>(bytes.data()), [&](absl::Status s) { result = s; });
    if (!RunUntil([&] { return result.has_value(); })) return absl::DeadlineExceededError("restore did not finish");
    if (!result->ok()) return *result;
    return bytes;
  }
  bool RunUntil(const std::function<bool()>& condition) {
    return manta::testing::WaitFor(
        [&] {
          loop_.RunUntilIdle();
          return condition();
        },
        10000);
  }
  static size_t FilesIn(const std::string& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
    return n;
  }

  manta::testing::TempDir tmp_;
  EventLoop loop_;
};

TEST_F(FileSpillerTest, BatchGoesToOneFileAndRestoresByteForByte) {
  FileSpiller spiller(loop_, tmp_.path() + "/spill", 2);
  std::vector<std::string> objects = {RandomBytes(100, 1), RandomBytes(0, 2), RandomBytes(1 << 20, 3),
                                      RandomBytes(7, 4)};
  absl::StatusOr<std::vector<SpillLocation>> locations = Spill(spiller, objects);
  ASSERT_TRUE(locations.ok()) << locations.status();
  ASSERT_EQ(locations->size(), objects.size());
  EXPECT_EQ(spiller.num_files(), 1u);
  EXPECT_EQ(FilesIn(spiller.dir()), 1u);
  int64_t offset = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    const SpillLocation& loc = (*locations)[i];
    EXPECT_EQ(loc.path, (*locations)[0].path);
    EXPECT_EQ(loc.offset, offset);
    EXPECT_EQ(loc.size, static_cast<int64_t>(objects[i].size()));
    offset += loc.size;
  }
  EXPECT_EQ(static_cast<int64_t>(fs::file_size((*locations)[0].path)), offset);
  // Restore in reverse order, each exactly.
  for (size_t i = objects.size(); i-- > 0;) {
    absl::StatusOr<std::string> bytes = Restore(spiller, (*locations)[i]);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_TRUE(*bytes == objects[i]) << "object " << i << " differs";
  }
  EXPECT_THAT((*locations)[0].ToUrl(), HasSubstr("?offset=0&size=100"));
}

TEST_F(FileSpillerTest, ConcurrentBatchesGetTheirOwnFiles) {
  FileSpiller spiller(loop_, tmp_.path(), 3);
  constexpr int kBatches = 20;
  std::vector<std::vector<std::string>> batches;
  for (int b = 0; b < kBatches; ++b) batches.push_back({RandomBytes(1000 + b, b), RandomBytes(5000, 100 + b)});
  std::vector<std::optional<absl::StatusOr<std::vector<SpillLocation>>>> results(kBatches);
  for (int b = 0; b < kBatches; ++b) {
    std::vector<SpillItem> items;
    for (const std::string& o : batches[b]) {
      items.push_back({ObjectID::FromRandom(), reinterpret_cast<const uint8_t*>(o.data()),
                       static_cast<int64_t>(o.size())});
    }
    spiller.SpillAsync(std::move(items), [&results, b](auto r) { results[b] = std::move(r); });
  }
  ASSERT_TRUE(RunUntil([&] {
    for (const auto& r : results) {
      if (!r.has_value()) return false;
    }
    return true;
  }));
  EXPECT_EQ(spiller.num_files(), static_cast<size_t>(kBatches));
  for (int b = 0; b < kBatches; ++b) {
    ASSERT_TRUE(results[b]->ok()) << results[b]->status();
    for (size_t i = 0; i < batches[b].size(); ++i) {
      auto bytes = Restore(spiller, (**results[b])[i]);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_TRUE(*bytes == batches[b][i]) << "batch " << b << " object " << i;
      spiller.Delete((**results[b])[i]);
    }
  }
  EXPECT_EQ(spiller.num_files(), 0u);
  EXPECT_TRUE(RunUntil([&] { return FilesIn(tmp_.path()) == 0; }));
}

TEST_F(FileSpillerTest, FileIsRemovedWithItsLastObject) {
  FileSpiller spiller(loop_, tmp_.path(), 1);
  auto first = Spill(spiller, {"aaaa", "bbbbbbbb", "cc"});
  auto second = Spill(spiller, {"dddd"});
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_NE((*first)[0].path, (*second)[0].path);
  EXPECT_EQ(spiller.num_files(), 2u);
  std::string path = (*first)[0].path;

  spiller.Delete((*first)[1]);
  spiller.Delete((*first)[0]);
  EXPECT_EQ(spiller.num_files(), 2u);
  EXPECT_TRUE(fs::exists(path));
  auto still = Restore(spiller, (*first)[2]);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(*still, "cc");

  spiller.Delete((*first)[2]);
  EXPECT_EQ(spiller.num_files(), 1u);
  EXPECT_TRUE(RunUntil([&] { return !fs::exists(path); })) << path << " was not removed";
  spiller.Delete((*second)[0]);
  EXPECT_EQ(spiller.num_files(), 0u);
  EXPECT_TRUE(RunUntil([&] { return FilesIn(tmp_.path()) == 0; }));
  // Deleting again (or something unknown) is harmless.
  spiller.Delete((*second)[0]);
  EXPECT_EQ(spiller.num_files(), 0u);
}

TEST_F(FileSpillerTest, SpilledObjectsAreReadableByTheirOwnerAlone) {
  std::string dir = tmp_.path() + "/open/spill";
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);  // 0755, as a umask makes it
  FileSpiller spiller(loop_, dir, 1);
  auto spilled = Spill(spiller, {"secret bytes"});
  ASSERT_TRUE(spilled.ok());
  EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(fs::status((*spilled)[0].path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(FileSpillerTest, DestructorRemovesRemainingFiles) {
  std::string path;
  {
    FileSpiller spiller(loop_, tmp_.path(), 1);
    auto spilled = Spill(spiller, {"xyz"});
    ASSERT_TRUE(spilled.ok());
    path = (*spilled)[0].path;
    EXPECT_TRUE(fs::exists(path));
  }
  EXPECT_FALSE(fs::exists(path));
}

// A full disk: the spiller names its files spill_<pid>_<n>, so a symlink to /dev/full
// in that place makes the write fail with ENOSPC.
TEST_F(FileSpillerTest, DiskFullFailsTheSpillAndRemovesThePartialFile) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  FileSpiller spiller(loop_, tmp_.path(), 1);
  std::string path = tmp_.path() + "/spill_" + std::to_string(getpid()) + "_0";
  fs::create_symlink("/dev/full", path);
  auto result = Spill(spiller, {"some bytes"});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(path));
  EXPECT_EQ(spiller.num_files(), 0u);
  EXPECT_FALSE(fs::is_symlink(path));
  // The next batch goes to a new file and works.
  auto next = Spill(spiller, {"more"});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(spiller.num_files(), 1u);
}

TEST_F(FileSpillerTest, UnusableDirectoryFailsWithThePath) {
  std::string not_a_dir = tmp_.path() + "/a_file";
  std::ofstream(not_a_dir) << "x";
  FileSpiller spiller(loop_, not_a_dir, 1);
  auto result = Spill(spiller, {"bytes"});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(not_a_dir + "/spill_"));
  EXPECT_EQ(spiller.num_files(), 0u);
}

TEST_F(FileSpillerTest, RestoreFromMissingOrTruncatedFileIsDataLoss) {
  FileSpiller spiller(loop_, tmp_.path(), 1);
  auto spilled = Spill(spiller, {"0123456789", "abcdefghij"});
  ASSERT_TRUE(spilled.ok());
  std::string path = (*spilled)[0].path;

  fs::resize_file(path, 15);  // cuts the second object in half
  auto first = Restore(spiller, (*spilled)[0]);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "0123456789");
  auto truncated = Restore(spiller, (*spilled)[1]);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(truncated.status().message()), HasSubstr(path));

  fs::remove(path);
  auto missing = Restore(spiller, (*spilled)[0]);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
}

}  // namespace
}  // namespace manta::object_store
