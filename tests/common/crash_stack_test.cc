// InstallCrashStackTraces: a process dying of a fatal signal prints where, and dies
// of the same signal; SIGTERM and signals the program handles are left alone.
#include "src/common/crash_stack.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace manta {
namespace {

void OnUsr(int) {}

// Runs `body` in a child whose stderr is captured; returns the text and the status.
std::string RunChild(void (*body)(), int* status) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    body();
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, status, 0);
  return out;
}

__attribute__((noinline)) void CrashingFunctionForTheTest() {
  InstallCrashStackTraces();
  abort();
}

TEST(CrashStackTest, AbortPrintsTheStackAndDiesOfIt) {
  int status = 0;
  std::string err = RunChild(CrashingFunctionForTheTest, &status);
  ASSERT_TRUE(WIFSIGNALED(status)) << err;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_NE(err.find("SIGABRT"), std::string::npos) << err;
  EXPECT_NE(err.find("CrashingFunctionForTheTest"), std::string::npos) << err;
}

TEST(CrashStackTest, SigtermAndHandledSignalsAreLeftAlone) {
  int status = 0;
  std::string err = RunChild(
      [] {
        signal(SIGSEGV, OnUsr);
        InstallCrashStackTraces();
        struct sigaction segv {}, term {};
        sigaction(SIGSEGV, nullptr, &segv);
        sigaction(SIGTERM, nullptr, &term);
        if (segv.sa_handler != OnUsr) _exit(3);
        if (term.sa_handler != SIG_DFL) _exit(4);
        raise(SIGTERM);
      },
      &status);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status) << " " << err;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(err.find("SIGTERM"), std::string::npos) << err;
}

}  // namespace
}  // namespace manta
