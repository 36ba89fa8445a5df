// Working-dir archives (src/jobs/package.h): a directory packed and unpacked alike
// (executable bits, nested folders, a link inside kept as its file), links leaving it
// and size limits refused by name, and archives that would write outside their
// directory (or are cut short) refused with nothing left behind.
#include "src/jobs/package.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util/test_util.h"

namespace manta::jobs {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << content;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(PackageTest, ADirectoryComesBackAlike) {
  manta::testing::TempDir tmp;
  const fs::path src = fs::path(tmp.path()) / "src";
  Write(src / "run.sh", "#!/bin/sh\necho hi\n");
  fs::permissions(src / "run.sh", fs::perms::owner_all);
  Write(src / "data/rows.csv", "a,b\n1,2\n");
  Write(src / "data/empty", "");
  fs::create_symlink("data/rows.csv", src / "rows-link.csv");
  absl::StatusOr<std::string> archive = PackDirectory(src.string(), PackageLimits());
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_TRUE(IsPackageId(PackageId(*archive)));
  EXPECT_EQ(PackageId(*PackDirectory(src.string(), PackageLimits())), PackageId(*archive));  // stable

  const fs::path out = fs::path(tmp.path()) / "out";
  ASSERT_TRUE(UnpackArchive(*archive, out.string(), PackageLimits()).ok());
  EXPECT_EQ(Read(out / "run.sh"), "#!/bin/sh\necho hi\n");
  EXPECT_NE(fs::status(out / "run.sh").permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_EQ(fs::status(out / "data/rows.csv").permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_EQ(Read(out / "data/rows.csv"), "a,b\n1,2\n");
  EXPECT_EQ(Read(out / "rows-link.csv"), "a,b\n1,2\n");
  EXPECT_FALSE(fs::is_symlink(out / "rows-link.csv"));
  EXPECT_TRUE(fs::exists(out / "data/empty"));
}

TEST(PackageTest, LinksLeavingTheDirectoryAndTheLimitsAreRefusedByName) {
  manta::testing::TempDir tmp;
  const fs::path src = fs::path(tmp.path()) / "src";
  Write(src / "a.txt", std::string(1000, 'a'));
  Write(fs::path(tmp.path()) / "secret", "s");
  fs::create_symlink(fs::path(tmp.path()) / "secret", src / "escape");
  absl::Status escape = PackDirectory(src.string(), PackageLimits()).status();
  EXPECT_EQ(escape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(escape.message().find("escape is a link to"), std::string::npos) << escape;
  fs::remove(src / "escape");
  PackageLimits small;
  small.max_bytes = 999;
  absl::Status big = PackDirectory(src.string(), small).status();
  EXPECT_NE(big.message().find("more than 999 bytes"), std::string::npos) << big;
  EXPECT_FALSE(PackDirectory((src / "a.txt").string(), PackageLimits()).ok());  // a file, not a directory
}

std::string Entry(const std::string& path, const std::string& content) {
  std::string out;
  out.push_back(static_cast<char>(path.size()));
  out += path;
  out.push_back(0);
  out.push_back(static_cast<char>(content.size()));
  return out + content;
}

TEST(PackageTest, HostileArchivesAreRefusedAndLeaveNothing) {
  manta::testing::TempDir tmp;
  for (const char* path : {"../outside", "/etc/evil", "a/../../b", "a//b", "./x", ""}) {
    SCOPED_TRACE(path);
    const fs::path out = fs::path(tmp.path()) / "out";
    const std::string archive = std::string("MANTAPKG1\n") + Entry("ok.txt", "fine") + Entry(path, "bad");
    absl::Status s = UnpackArchive(archive, out.string(), PackageLimits());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_FALSE(fs::exists(out));  // not even ok.txt
  }
  EXPECT_FALSE(fs::exists(fs::path(tmp.path()).parent_path() / "outside"));
  const fs::path out = fs::path(tmp.path()) / "cut";
  EXPECT_FALSE(UnpackArchive(std::string("MANTAPKG1\n") + Entry("a", "abc").substr(0, 5), out.string(),
                             PackageLimits()).ok());
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(UnpackArchive("not an archive", out.string(), PackageLimits()).ok());
  PackageLimits one;
  one.max_files = 1;
  EXPECT_FALSE(UnpackArchive(std::string("MANTAPKG1\n") + Entry("a", "1") + Entry("b", "2"), out.string(), one).ok());
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace manta::jobs
