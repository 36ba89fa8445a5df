// Tests of src/common/security.h: tokens, token files, the private temp root, where a
// process finds its cluster's token, and HMAC-SHA256.
#include "src/common/security.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "src/common/id.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta {
namespace {

using ::manta::testing::TempDir;

using ::manta::testing::ScopedEnv;

int Mode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// A session directory under `root` the way `manta start` leaves one.
void MakeSession(const std::string& root, const std::string& name, const std::string& address,
                 const std::string& token) {
  std::string dir = root + "/sessions/" + name;
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic(dir + "/gcs_address", address + "\n").ok());
  ASSERT_TRUE(WriteTokenFile(dir + "/" + kClusterTokenFileName, token).ok());
}

TEST(SecurityTest, TokensAre64HexDigitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string token = NewClusterToken();
    EXPECT_TRUE(CheckTokenFormat(token).ok()) << token;
    seen.insert(token);
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_FALSE(CheckTokenFormat("").ok());
  EXPECT_FALSE(CheckTokenFormat(std::string(63, 'a')).ok());
  EXPECT_FALSE(CheckTokenFormat(std::string(64, 'g')).ok());
  EXPECT_FALSE(CheckTokenFormat(std::string(64, 'A')).ok());
}

TEST(SecurityTest, ErrorsNeverContainTheToken) {
  std::string almost = NewClusterToken() + "0";
  absl::Status s = CheckTokenFormat(almost);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(std::string(s.message()).find(almost.substr(0, 16)), std::string::npos) << s;
}

TEST(SecurityTest, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

TEST(SecurityTest, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  std::string mac = HmacSha256("Jefe", "what do ya want for nothing?");
  EXPECT_EQ(BytesToHex(reinterpret_cast<const uint8_t*>(mac.data()), mac.size()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(SecurityTest, TokenFileIsPrivateAndReadsBack) {
  TempDir dir;
  std::string path = dir.path() + "/token";
  std::string token = NewClusterToken();
  ASSERT_TRUE(WriteTokenFile(path, token).ok());
  EXPECT_EQ(Mode(path), 0600);
  auto read = ReadTokenFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, token);
  EXPECT_FALSE(WriteTokenFile(path, "not a token").ok());
}

TEST(SecurityTest, TokenFileReadableByOthersIsRefusedWithTheFix) {
  TempDir dir;
  std::string path = dir.path() + "/token";
  ASSERT_TRUE(WriteTokenFile(path, NewClusterToken()).ok());
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  auto read = ReadTokenFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(read.status().message().find("chmod 600"), std::string::npos) << read.status();
}

TEST(SecurityTest, TokenFileOfAnotherUserOrWithoutATokenIsRefused) {
  TempDir dir;
  std::string garbage = dir.path() + "/garbage";
  ASSERT_TRUE(WriteFileAtomic(garbage, "hello\n", 0600).ok());
  EXPECT_EQ(ReadTokenFile(garbage).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTokenFile(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
  // A symbolic link to a token file is not followed.
  std::string real = dir.path() + "/real";
  ASSERT_TRUE(WriteTokenFile(real, NewClusterToken()).ok());
  ASSERT_EQ(symlink(real.c_str(), (dir.path() + "/link").c_str()), 0);
  EXPECT_FALSE(ReadTokenFile(dir.path() + "/link").ok());
  if (geteuid() == 0) {
    ASSERT_EQ(chown(real.c_str(), 65534, 65534), 0);
    auto read = ReadTokenFile(real);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied) << read.status();
  } else {
    EXPECT_EQ(ReadTokenFile("/etc/shadow").status().code(), absl::StatusCode::kPermissionDenied);
  }
}

TEST(SecurityTest, PrivateDirIsCreated0700AndTightened) {
  TempDir dir;
  std::string root = dir.path() + "/a/b";
  ASSERT_TRUE(EnsurePrivateDir(root).ok());
  EXPECT_EQ(Mode(root), 0700);
  ASSERT_EQ(chmod(root.c_str(), 0755), 0);
  ASSERT_TRUE(EnsurePrivateDir(root).ok());
  EXPECT_EQ(Mode(root), 0700);
}

TEST(SecurityTest, PrivateDirOwnedByAnotherUserOrASymlinkIsRefused) {
  TempDir dir;
  std::string target = dir.path() + "/target";
  ASSERT_TRUE(EnsurePrivateDir(target).ok());
  std::string link = dir.path() + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(EnsurePrivateDir(link).code(), absl::StatusCode::kPermissionDenied);

  std::string foreign = dir.path() + "/foreign";
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(foreign.c_str(), 0777), 0);
    ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
  } else {
    foreign = "/";  // root's
  }
  absl::Status s = EnsurePrivateDir(foreign);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("MANTA_TEMP_DIR"), std::string::npos) << s;
}

TEST(SecurityTest, TempRootIsPerUserUnlessSet) {
  {
    ScopedEnv env("MANTA_TEMP_DIR", "");
    EXPECT_EQ(TempRoot(), "/tmp/manta-" + std::to_string(geteuid()));
  }
  ScopedEnv env("MANTA_TEMP_DIR", "/somewhere");
  EXPECT_EQ(TempRoot(), "/somewhere");
}

TEST(SecurityTest, ClusterTokenIsFoundInTheSessionOfItsAddress) {
  TempDir root;
  ScopedEnv no_token(kClusterTokenEnv, "");
  ScopedEnv no_file(kClusterTokenFileEnv, "");
  std::string a = NewClusterToken(), b = NewClusterToken(), c = NewClusterToken();
  MakeSession(root.path(), "s1", "127.0.0.1:1000", a);
  MakeSession(root.path(), "s2", "127.0.0.1:2000", b);
  // A private cluster of ray::Init keeps its sessions under private/<id>/.
  MakeSession(root.path() + "/private/77-abc", "s3", "127.0.0.1:3000", c);
  EXPECT_EQ(FindClusterToken("127.0.0.1:1000", "", root.path()).value_or(""), a);
  EXPECT_EQ(FindClusterToken("127.0.0.1:2000", "", root.path()).value_or(""), b);
  EXPECT_EQ(FindClusterToken("127.0.0.1:3000", "", root.path()).value_or(""), c);
  auto missing = FindClusterToken("127.0.0.1:4000", "", root.path());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--token-file"), std::string::npos) << missing.status();
}

TEST(SecurityTest, TheSessionThatRecordedAnAddressLastHoldsItsToken) {
  // A cluster that died without `manta stop` left its session; a new cluster took
  // the same address. Whatever order the directory lists them in, the newer wins.
  TempDir root;
  ScopedEnv no_token(kClusterTokenEnv, "");
  ScopedEnv no_file(kClusterTokenFileEnv, "");
  std::string dead = NewClusterToken(), live = NewClusterToken();
  MakeSession(root.path(), "z_dead", "127.0.0.1:1000", dead);
  MakeSession(root.path(), "a_live", "127.0.0.1:1000", live);
  const auto older = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  std::filesystem::last_write_time(root.path() + "/sessions/z_dead/gcs_address", older);
  EXPECT_EQ(FindClusterToken("127.0.0.1:1000", "", root.path()).value_or(""), live);
  std::filesystem::last_write_time(root.path() + "/sessions/a_live/gcs_address", older - std::chrono::hours(1));
  EXPECT_EQ(FindClusterToken("127.0.0.1:1000", "", root.path()).value_or(""), dead);
}

TEST(SecurityTest, ExplicitFileThenFileVariableThenTokenVariableComeFirst) {
  TempDir root;
  std::string session = NewClusterToken(), file = NewClusterToken(), env_file = NewClusterToken(),
              env_token = NewClusterToken();
  MakeSession(root.path(), "s1", "127.0.0.1:1000", session);
  ASSERT_TRUE(WriteTokenFile(root.path() + "/file", file).ok());
  ASSERT_TRUE(WriteTokenFile(root.path() + "/env_file", env_file).ok());
  ScopedEnv token_var(kClusterTokenEnv, env_token);
  ScopedEnv file_var(kClusterTokenFileEnv, root.path() + "/env_file");
  EXPECT_EQ(FindClusterToken("127.0.0.1:1000", root.path() + "/file", root.path()).value_or(""), file);
  EXPECT_EQ(FindClusterToken("127.0.0.1:1000", "", root.path()).value_or(""), env_file);
  unsetenv(kClusterTokenFileEnv);
  EXPECT_EQ(FindClusterToken("127.0.0.1:1000", "", root.path()).value_or(""), env_token);
  setenv(kClusterTokenEnv, "short", 1);
  auto bad = FindClusterToken("127.0.0.1:1000", "", root.path());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(kClusterTokenEnv), std::string::npos) << bad.status();
}

TEST(SecurityTest, DaemonTokenComesFromItsFileOrTheVariableWhichIsThenRemoved) {
  TempDir dir;
  std::string token = NewClusterToken();
  {
    ScopedEnv env(kClusterTokenEnv, token);
    EXPECT_EQ(LoadDaemonToken("").value_or(""), token);
    EXPECT_EQ(std::getenv(kClusterTokenEnv), nullptr);
  }
  ASSERT_TRUE(WriteTokenFile(dir.path() + "/t", token).ok());
  EXPECT_EQ(LoadDaemonToken(dir.path() + "/t").value_or(""), token);
  ScopedEnv none(kClusterTokenEnv, "");
  auto missing = LoadDaemonToken("");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--token-file"), std::string::npos) << missing.status();
}

}  // namespace
}  // namespace manta
