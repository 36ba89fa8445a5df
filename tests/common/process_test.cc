// Tests of child-process helpers (src/common/process.h). Every child started here is
// killed and reaped before its test ends.
#include "src/common/process.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>

#include <climits>
#include <cstdlib>

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "absl/strings/str_split.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta {
namespace {

using ::manta::testing::TempDir;
using ::manta::testing::WaitFor;
using ::testing::HasSubstr;

// Kills and reaps `pid` on destruction unless it is already gone.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0 && !ReapIfExited(pid_)) {
      (void)SignalProcess(pid_, SIGKILL);
      WaitForExit(pid_, 5000);
    }
  }

 private:
  pid_t pid_;
};

ProcessOptions Command(std::vector<std::string> argv, std::string output_file = "") {
  ProcessOptions options;
  options.argv = std::move(argv);
  options.output_file = std::move(output_file);
  return options;
}

TEST(ProcessTest, RaiseOpenFileLimitLiftsTheSoftLimitToTheHardOne) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit lowered = before;
  lowered.rlim_cur = std::min<rlim_t>(before.rlim_max, 256);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  RaiseOpenFileLimit();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, before.rlim_max);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

TEST(ProcessTest, StartsTrue) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"/bin/true"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  EXPECT_GT(*pid, 0);
  EXPECT_TRUE(WaitForExit(*pid, 5000));
  EXPECT_FALSE(IsProcessAlive(*pid));
}

TEST(ProcessTest, LooksUpExecutablesInPath) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"true"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  EXPECT_TRUE(WaitForExit(*pid, 5000));
}

TEST(ProcessTest, MissingExecutableIsAnErrorNamingIt) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"/nonexistent/manta_no_such_binary", "x"}));
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("/nonexistent/manta_no_such_binary"));

  absl::StatusOr<pid_t> in_path = StartProcess(Command({"manta_no_such_binary_in_path"}));
  ASSERT_FALSE(in_path.ok());
  EXPECT_THAT(std::string(in_path.status().message()), HasSubstr("manta_no_such_binary_in_path"));
}

TEST(ProcessTest, ADetachedChildIsNotOurChildAndItsOwnPidIsReturned) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/pid";
  ProcessOptions options = Command({"/bin/sh", "-c", "echo $$ > " + pid_file + "; exec sleep 30"});
  options.detach = true;
  absl::StatusOr<pid_t> pid = StartProcess(options);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitFor(
      [&] {
        absl::StatusOr<std::string> text = ReadFile(pid_file);
        return text.ok() && text->find('\n') != std::string::npos;
      },
      5000));
  EXPECT_EQ(std::stoi(*ReadFile(pid_file)), *pid);
  EXPECT_TRUE(IsProcessAlive(*pid));
  // Reparented away from us (a tree kill of this process does not reach it), in a
  // session of its own.
  EXPECT_EQ(waitpid(*pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_NE(getsid(*pid), getsid(0));
}

TEST(ProcessTest, ADetachedStartOfAMissingExecutableIsStillAnError) {
  ProcessOptions options = Command({"/nonexistent/manta_no_such_binary"});
  options.detach = true;
  absl::StatusOr<pid_t> pid = StartProcess(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("/nonexistent/manta_no_such_binary"));
}

TEST(ProcessTest, EmptyArgvIsAnError) {
  absl::StatusOr<pid_t> pid = StartProcess(ProcessOptions());
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProcessTest, OutputFileCapturesStdoutStderrAndEnvironment) {
  TempDir dir;
  std::string out = dir.path() + "/out.log";
  ProcessOptions options = Command({"/bin/sh", "-c", "echo hello $MANTA_TEST_VALUE; echo oops >&2"}, out);
  options.env = {{"MANTA_TEST_VALUE", "world"}};
  absl::StatusOr<pid_t> pid = StartProcess(options);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  absl::StatusOr<std::string> contents = ReadFile(out);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(*contents, "hello world\noops\n");
}

TEST(ProcessTest, SecretsReachTheChildOnAPipeAndOurSecretVariablesDoNot) {
  TempDir dir;
  std::string out = dir.path() + "/out.log";
  // The child reads its secrets' descriptor, and prints what it inherited.
  ProcessOptions options = Command(
      {"/bin/sh", "-c",
       "tr '\\0' '|' <&$MANTA_SECRETS_FD; echo; echo \"token=$MANTA_CLUSTER_TOKEN pw=$MANTA_REDIS_PASSWORD "
       "other=$MANTA_TEST_OTHER\""},
      out);
  options.secrets = {{"MANTA_CLUSTER_TOKEN", "t0ken"}, {"B", "two words"}};
  setenv("MANTA_CLUSTER_TOKEN", "ours", 1);
  setenv("MANTA_REDIS_PASSWORD", "ours-too", 1);
  setenv("MANTA_TEST_OTHER", "kept", 1);
  absl::StatusOr<pid_t> pid = StartProcess(options);
  unsetenv("MANTA_CLUSTER_TOKEN");
  unsetenv("MANTA_REDIS_PASSWORD");
  unsetenv("MANTA_TEST_OTHER");
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  absl::StatusOr<std::string> contents = ReadFile(out);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_THAT(*contents, HasSubstr("B|two words|MANTA_CLUSTER_TOKEN|t0ken|\n"));
  EXPECT_THAT(*contents, HasSubstr("token= pw= other=kept\n"));
}

TEST(ProcessTest, TooManySecretsAreRefusedBeforeAnythingStarts) {
  ProcessOptions options = Command({"/bin/true"});
  options.secrets = {{"BIG", std::string(8192, 'x')}};
  absl::StatusOr<pid_t> pid = StartProcess(options);
  EXPECT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("4096"));
}

// Puts `payload` on a pipe named by MANTA_SECRETS_FD, as a parent would.
int OfferSecrets(const std::string& payload) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  EXPECT_EQ(write(fds[1], payload.data(), payload.size()), static_cast<ssize_t>(payload.size()));
  close(fds[1]);
  setenv(kSecretsFdEnv, std::to_string(fds[0]).c_str(), 1);
  return fds[0];
}

TEST(ProcessTest, TakeInheritedSecretsReadsThemOnceAndClosesThePipe) {
  EXPECT_TRUE(TakeInheritedSecrets()->empty());  // none passed
  int fd = OfferSecrets(std::string("A\0one\0B\0\0", 9));
  absl::StatusOr<std::map<std::string, std::string>> secrets = TakeInheritedSecrets();
  ASSERT_TRUE(secrets.ok()) << secrets.status();
  EXPECT_EQ(*secrets, (std::map<std::string, std::string>{{"A", "one"}, {"B", ""}}));
  EXPECT_EQ(std::getenv(kSecretsFdEnv), nullptr);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "the pipe was left open";
  EXPECT_TRUE(TakeInheritedSecrets()->empty());
}

TEST(ProcessTest, TakeInheritedSecretsRefusesMalformedInput) {
  OfferSecrets(std::string("A\0one", 5));  // no closing NUL
  absl::StatusOr<std::map<std::string, std::string>> secrets = TakeInheritedSecrets();
  EXPECT_FALSE(secrets.ok());
  EXPECT_THAT(std::string(secrets.status().message()), HasSubstr("malformed"));
  setenv(kSecretsFdEnv, "1", 1);  // stdout is never ours to read
  EXPECT_FALSE(TakeInheritedSecrets().ok());
  setenv(kSecretsFdEnv, "x", 1);
  EXPECT_FALSE(TakeInheritedSecrets().ok());
}

TEST(ProcessTest, TakeInheritedSecretsReadsOnlyAPipeAndOnlyUntilItsDeadline) {
  // A regular file where the pipe should be: refused unread.
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/secrets", std::string("A\0one\0", 6)).ok());
  int file = open((dir.path() + "/secrets").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  setenv(kSecretsFdEnv, std::to_string(file).c_str(), 1);
  absl::StatusOr<std::map<std::string, std::string>> secrets = TakeInheritedSecrets();
  EXPECT_FALSE(secrets.ok());
  EXPECT_THAT(std::string(secrets.status().message()), HasSubstr("not a pipe"));
  close(file);
  // A pipe whose writer never finishes: given up at the deadline, not waited on for ever.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], "A", 1), 1);
  setenv(kSecretsFdEnv, std::to_string(fds[0]).c_str(), 1);
  const int64_t start = MonotonicMs();
  secrets = TakeInheritedSecrets(/*timeout_ms=*/300);
  EXPECT_FALSE(secrets.ok());
  EXPECT_THAT(std::string(secrets.status().message()), HasSubstr("timed out"));
  EXPECT_LT(MonotonicMs() - start, 3000);
  EXPECT_EQ(fcntl(fds[0], F_GETFD), -1) << "the pipe was left open";
  close(fds[1]);
}

TEST(ProcessTest, OutputFileIsAppended) {
  TempDir dir;
  std::string out = dir.path() + "/out.log";
  ASSERT_TRUE(WriteFileAtomic(out, "before\n").ok());
  absl::StatusOr<pid_t> pid = StartProcess(Command({"/bin/echo", "after"}, out));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  EXPECT_EQ(ReadFile(out).value_or(""), "before\nafter\n");
}

TEST(ProcessTest, UnwritableOutputFileIsAnError) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"/bin/true"}, "/nonexistent/dir/out.log"));
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("/nonexistent/dir/out.log"));
}

TEST(ProcessTest, TheChildStartsInItsWorkingDir) {
  TempDir dir;
  TempDir out_dir;
  std::string out = out_dir.path() + "/out.log";
  ProcessOptions options = Command({"/bin/sh", "-c", "pwd -P"}, out);
  options.working_dir = dir.path();
  absl::StatusOr<pid_t> pid = StartProcess(options);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  char real[PATH_MAX];
  ASSERT_NE(realpath(dir.path().c_str(), real), nullptr);
  EXPECT_EQ(ReadFile(out).value_or(""), std::string(real) + "\n");
}

TEST(ProcessTest, ARelativeExecutableIsFoundFromTheParentsDirectoryNotTheWorkingDir) {
  TempDir exe_dir;
  TempDir work_dir;
  TempDir out_dir;
  std::string script = exe_dir.path() + "/script.sh";
  ASSERT_TRUE(WriteFileAtomic(script, "#!/bin/sh\necho ran\n").ok());
  ASSERT_EQ(chmod(script.c_str(), 0700), 0);
  char cwd[PATH_MAX];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(exe_dir.path().c_str()), 0);
  ProcessOptions options = Command({"./script.sh"}, out_dir.path() + "/out.log");
  options.working_dir = work_dir.path();
  absl::StatusOr<pid_t> pid = StartProcess(options);
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  EXPECT_EQ(ReadFile(out_dir.path() + "/out.log").value_or(""), "ran\n");
}

TEST(ProcessTest, AWorkingDirThatCannotBeEnteredIsAnErrorNamingIt) {
  ProcessOptions options = Command({"/bin/true"});
  options.working_dir = "/nonexistent/manta_no_such_dir";
  absl::StatusOr<pid_t> pid = StartProcess(options);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("/nonexistent/manta_no_such_dir"));
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("working directory"));
}

// Descriptors opened without close-on-exec (Asio's sockets are) stay with the
// parent: the child holds its standard ones and its secrets pipe only.
TEST(ProcessTest, TheChildInheritsNoDescriptorButItsStdioAndSecrets) {
  TempDir dir;
  std::string out = dir.path() + "/out.log";
  const int leaky = open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GT(leaky, STDERR_FILENO);
  ProcessOptions options = Command({"/bin/sh", "-c", "ls /proc/$$/fd; echo secrets=$MANTA_SECRETS_FD"}, out);
  options.secrets = {{"S", "x"}};
  absl::StatusOr<pid_t> pid = StartProcess(options);
  close(leaky);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  absl::StatusOr<std::string> contents = ReadFile(out);
  ASSERT_TRUE(contents.ok()) << contents.status();
  const size_t at = contents->find("secrets=");
  ASSERT_NE(at, std::string::npos) << *contents;
  const std::string secrets_fd = contents->substr(at + 8, contents->find('\n', at) - at - 8);
  std::vector<std::string> fds = absl::StrSplit(contents->substr(0, at), '\n', absl::SkipEmpty());
  EXPECT_THAT(fds, ::testing::UnorderedElementsAre("0", "1", "2", secrets_fd)) << *contents;
}

TEST(ProcessTest, SleepingChildIsAliveUntilKilled) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"sleep", "30"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  EXPECT_TRUE(IsProcessAlive(*pid));
  EXPECT_FALSE(ReapIfExited(*pid));
  EXPECT_FALSE(WaitForExit(*pid, 20));  // still running after a short wait

  ASSERT_TRUE(SignalProcess(*pid, SIGKILL).ok());
  EXPECT_TRUE(WaitForExit(*pid, 5000));
  EXPECT_FALSE(IsProcessAlive(*pid));
  // Signalling a process that is gone is not an error.
  EXPECT_TRUE(SignalProcess(*pid, SIGTERM).ok());
}

TEST(ProcessTest, KilledButUnreapedChildIsNotAlive) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"sleep", "30"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  ASSERT_TRUE(SignalProcess(*pid, SIGKILL).ok());
  // Nobody reaps it here: it becomes a zombie, which does not count as alive.
  EXPECT_TRUE(WaitFor([&] { return !IsProcessAlive(*pid); }, 5000));
}

TEST(ProcessTest, SignalProcessRejectsBadPids) {
  EXPECT_EQ(SignalProcess(0, SIGTERM).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SignalProcess(-1, SIGTERM).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsProcessAlive(0));
  EXPECT_FALSE(IsProcessAlive(-1));
}

TEST(ProcessTest, ProcessCommandLine) {
  absl::StatusOr<pid_t> pid = StartProcess(Command({"sleep", "30"}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ChildGuard guard(*pid);
  // StartProcess returns once exec has begun; the kernel shows the new command line
  // a moment later, once the new image is set up.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return ProcessCommandLine(*pid) == "sleep 30"; }, 5000))
      << ProcessCommandLine(*pid);
  ASSERT_TRUE(SignalProcess(*pid, SIGKILL).ok());
  ASSERT_TRUE(WaitForExit(*pid, 5000));
  EXPECT_EQ(ProcessCommandLine(*pid), "");
}

TEST(ProcessTest, FindExecutable) {
  EXPECT_EQ(FindExecutable("sh").empty(), false);
  EXPECT_EQ(FindExecutable("manta_no_such_binary_anywhere"), "");
  std::string self = SelfExecutablePath();
  ASSERT_FALSE(self.empty());
  std::string name = self.substr(self.rfind('/') + 1);
  EXPECT_EQ(FindExecutable(name), self);
}

TEST(ProcessTest, DieWithParentKillsTheChildWhenItsParentExits) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    // The parent of the child under test: starts it, reports its pid, and exits.
    ProcessOptions options;
    options.argv = {"sleep", "30"};
    options.die_with_parent = true;
    auto pid = StartProcess(options);
    pid_t child = pid.ok() ? *pid : -1;
    ssize_t ignored = write(fds[1], &child, sizeof(child));
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  pid_t child = -1;
  ASSERT_EQ(read(fds[0], &child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  close(fds[0]);
  ASSERT_TRUE(WaitForExit(middle, 5000));
  ASSERT_GT(child, 0);
  ChildGuard guard(child);  // not ours to reap; kills it if the test fails
  EXPECT_TRUE(WaitFor([&] { return !IsProcessAlive(child); }, 5000));
}

}  // namespace
}  // namespace manta
