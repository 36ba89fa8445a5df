#include "src/common/process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "src/common/security.h"
#include "src/common/util.h"

extern char** environ;

namespace manta {

namespace {

// Variables that hold secrets: never passed on from our own environment.
constexpr const char* kSecretVariables[] = {kClusterTokenEnv, kRedisPasswordEnv, kWorkerStartupTokenEnv, kSecretsFdEnv};
constexpr size_t kMaxSecretBytes = 4096;  // within PIPE_BUF: written whole before the child runs

bool IsSecretVariable(const std::string& name) {
  for (const char* secret : kSecretVariables) {
    if (name == secret) return true;
  }
  return false;
}

// The child's environment: ours without the secrets, then options.env.
std::vector<std::string> ChildEnvironment(const ProcessOptions& options, int secrets_fd) {
  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos && !IsSecretVariable(entry.substr(0, eq))) {
      env_map[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [k, v] : options.env) env_map[k] = v;
  if (secrets_fd >= 0) env_map[kSecretsFdEnv] = std::to_string(secrets_fd);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env_map) env_strings.push_back(k + "=" + v);
  return env_strings;
}

// A pipe holding `secrets` (name NUL value NUL ...), its write end closed: returns the
// read end (close-on-exec, above the standard descriptors), or -1 when there are none.
absl::StatusOr<int> SecretsPipe(const std::map<std::string, std::string>& secrets) {
  if (secrets.empty()) return -1;
  std::string payload;
  for (const auto& [name, value] : secrets) {
    if (name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError("secret " + name + " holds a NUL byte");
    }
    payload += name + '\0' + value + '\0';
  }
  if (payload.size() > kMaxSecretBytes) {
    return absl::InvalidArgumentError("secrets for a child exceed " + std::to_string(kMaxSecretBytes) + " bytes");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  ssize_t written = write(fds[1], payload.data(), payload.size());
  int err = errno;
  close(fds[1]);
  if (written != static_cast<ssize_t>(payload.size())) {
    close(fds[0]);
    return absl::InternalError(std::string("writing secrets to a pipe: ") + std::strerror(err));
  }
  if (fds[0] <= STDERR_FILENO) {  // the child's stdio is replaced: keep clear of it
    int moved = fcntl(fds[0], F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    close(fds[0]);
    if (moved < 0) return absl::InternalError(std::string("fcntl: ") + std::strerror(errno));
    fds[0] = moved;
  }
  return fds[0];
}

// The child's stdout and stderr (-1: inherited), opened in the parent.
struct OutputFds {
  int out = -1;
  int err = -1;
  void Close() {
    if (err >= 0 && err != out) close(err);
    if (out >= 0) close(out);
    out = err = -1;
  }
};

absl::StatusOr<OutputFds> OpenOutput(const ProcessOptions& options) {
  auto open_file = [](const std::string& path) -> absl::StatusOr<int> {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return absl::InternalError("cannot open " + path + ": " + std::strerror(errno));
    return fd;
  };
  OutputFds fds;
  if (!options.output_file.empty()) {
    absl::StatusOr<int> fd = open_file(options.output_file);
    if (!fd.ok()) return fd.status();
    fds.out = fds.err = *fd;
  }
  if (!options.error_file.empty()) {
    absl::StatusOr<int> fd = open_file(options.error_file);
    if (!fd.ok()) {
      fds.Close();
      return fd.status();
    }
    fds.err = *fd;
  }
  return fds;
}

// What the child needs, all made by the parent before the child starts.
struct ChildArgs {
  const ProcessOptions* options;
  pid_t parent_pid;
  int secrets_fd;
  OutputFds output;
  int err_fd;  // {stage, errno} records to the parent (see StartProcess)
  char** argv;
  char** envp;
  void* grandchild_stack;  // top of the stack of a detached start's real child
};

// The child runs in the parent's memory (CLONE_VM, like vfork: the parent waits
// until it executes or exits), so it copies no page tables (forking a driver or a
// raylet with a big heap cost milliseconds) but may use only async-signal-safe calls
// that touch nothing of the parent's: no allocation, no locks.
constexpr size_t kChildStackBytes = 256 << 10;
constexpr int kCloneFlags = CLONE_VM | CLONE_VFORK | SIGCHLD;

void WriteRecord(int fd, int stage, int value) {
  int record[2] = {stage, value};
  ssize_t ignored = write(fd, record, sizeof(record));
  (void)ignored;
}

// In the child: descriptors, signals and directory set up, then exec; a failure is
// written to err_fd as {stage, errno} (stage 1: chdir, 2: exec).
[[noreturn]] void SetUpAndExec(const ChildArgs& a) {
  // Only the standard descriptors and the secrets pipe cross into the program: the
  // rest (the parent's sockets among them, opened without close-on-exec) are closed
  // at exec.
  syscall(SYS_close_range, STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC);
  if (a.secrets_fd >= 0) fcntl(a.secrets_fd, F_SETFD, 0);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  if (a.output.out >= 0) dup2(a.output.out, STDOUT_FILENO);
  if (a.output.err >= 0) dup2(a.output.err, STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int stage = 2;
  if (!a.options->working_dir.empty() && chdir(a.options->working_dir.c_str()) != 0) {
    stage = 1;
  } else {
    execvpe(a.argv[0], a.argv, a.envp);
  }
  WriteRecord(a.err_fd, stage, errno);
  _exit(127);
}

int GrandchildMain(void* arg) { SetUpAndExec(*static_cast<ChildArgs*>(arg)); }

int ChildMain(void* arg) {
  const ChildArgs& a = *static_cast<ChildArgs*>(arg);
  // The parent's handlers would run here, on its memory: back to the defaults before
  // the signals the parent blocked for the start are let through.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_IGN && action.sa_handler != SIG_DFL) {
      action.sa_handler = SIG_DFL;
      action.sa_flags = 0;
      sigaction(sig, &action, nullptr);
    }
  }
  if (a.options->die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before prctl took effect: then we were reparented.
    if (getppid() != a.parent_pid) _exit(127);
  }
  if (a.options->new_session || a.options->detach) setsid();
  if (!a.options->detach) SetUpAndExec(a);
  // Detached: the real child comes from here, so its parent is gone at once and init
  // reaps it. This one waits until it has executed (or failed), then reports its pid.
  const pid_t child = clone(GrandchildMain, a.grandchild_stack, kCloneFlags, arg);
  WriteRecord(a.err_fd, child < 0 ? 3 : 0, child < 0 ? errno : static_cast<int>(child));
  _exit(child < 0 ? 127 : 0);
}

// In the parent, once the child has executed or failed (so every record is written):
// reads the records from `err_fd` (see StartProcess) and returns the child's pid, or
// why it did not start. A detached start's intermediate reports the real child's pid
// ({0, pid}) after that child's own failure, if any.
absl::StatusOr<pid_t> AwaitExec(const ProcessOptions& options, pid_t pid, int err_fd) {
  if (options.detach) waitpid(pid, nullptr, 0);  // the intermediate, gone once it reported
  int failure[2] = {0, 0};
  bool failed = false;
  while (true) {
    int record[2];
    ssize_t n;
    do {
      n = read(err_fd, record, sizeof(record));
    } while (n < 0 && errno == EINTR);
    if (n != sizeof(record)) break;  // end of file: every writer executed or exited
    if (record[0] == 0) {
      pid = record[1];
    } else if (record[0] == 3) {
      return absl::InternalError(std::string("clone: ") + std::strerror(record[1]));
    } else {
      failure[0] = record[0];
      failure[1] = record[1];
      failed = true;
    }
  }
  if (!failed) return pid;
  if (!options.detach) waitpid(pid, nullptr, 0);
  if (failure[0] == 1) {
    return absl::FailedPreconditionError("cannot start " + options.argv[0] + " in working directory " +
                                         options.working_dir + ": " + std::strerror(failure[1]));
  }
  return absl::NotFoundError("cannot execute " + options.argv[0] + ": " + std::strerror(failure[1]));
}

// Starts ChildMain(`args`) on stacks of its own in our memory and returns once it has
// executed or exited (CLONE_VFORK); its pid.
absl::StatusOr<pid_t> CloneChild(ChildArgs& args) {
  // The child's stacks (the second for a detached start's real child).
  const size_t stacks_bytes = 2 * kChildStackBytes;
  void* stacks = mmap(nullptr, stacks_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stacks == MAP_FAILED) return absl::InternalError(std::string("mmap of a child's stack: ") + std::strerror(errno));
  char* base = static_cast<char*>(stacks);
  args.grandchild_stack = base + stacks_bytes;
  // Our signal handlers must not run in the child before it has reset them.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = clone(ChildMain, base + kChildStackBytes, kCloneFlags, &args);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  munmap(stacks, stacks_bytes);
  if (pid < 0) return absl::InternalError(std::string("clone: ") + std::strerror(clone_errno));
  return pid;
}

}  // namespace

absl::StatusOr<pid_t> StartProcess(const ProcessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to start");
  // Build everything the child needs first: the child (ChildMain) may make only
  // async-signal-safe calls.
  absl::StatusOr<int> secrets_fd = SecretsPipe(options.secrets);
  if (!secrets_fd.ok()) return secrets_fd.status();
  struct FdCloser {
    int fd;
    ~FdCloser() {
      if (fd >= 0) close(fd);
    }
  } secrets_closer{*secrets_fd};
  std::vector<std::string> env_strings = ChildEnvironment(options, *secrets_fd);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = options.argv;
  // A relative executable path names a file in the parent's directory, not in the
  // child's working_dir.
  if (!options.working_dir.empty() && argv_copy[0].find('/') != std::string::npos && argv_copy[0][0] != '/') {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) argv_copy[0] = std::string(cwd) + "/" + argv_copy[0];
  }
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  absl::StatusOr<OutputFds> output = OpenOutput(options);
  if (!output.ok()) return output.status();
  // A CLOEXEC pipe tells the parent whether exec succeeded: it closes on exec, or
  // carries {stage, errno} on failure (stage 1: chdir, 2: exec). A detached start's
  // intermediate process sends {0, pid of the child} first.
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    output->Close();
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  ChildArgs args{&options, getpid(), *secrets_fd, *output, err_pipe[1], argv.data(), envp.data(), nullptr};
  absl::StatusOr<pid_t> pid = CloneChild(args);
  close(err_pipe[1]);
  output->Close();
  if (!pid.ok()) {
    close(err_pipe[0]);
    return pid.status();
  }
  absl::StatusOr<pid_t> started = AwaitExec(options, *pid, err_pipe[0]);
  close(err_pipe[0]);
  return started;
}

namespace {

// Reads a secrets pipe to its end: at most kMaxSecretBytes + 1 bytes, by `deadline`.
absl::StatusOr<std::string> ReadSecretsPipe(int fd, const std::string& name, int64_t deadline) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    return absl::InvalidArgumentError(std::string(kSecretsFdEnv) + "=" + name + " is not a pipe");
  }
  std::string payload;
  char buffer[1024];
  while (payload.size() <= kMaxSecretBytes) {
    pollfd p{fd, POLLIN, 0};
    const int64_t left = deadline - MonotonicMs();
    int ready = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      return absl::DeadlineExceededError("reading secrets from descriptor " + name +
                                         " timed out: its writer did not finish");
    }
    ssize_t n = ready < 0 ? -1 : read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError("reading secrets from descriptor " + name + ": " + std::strerror(errno));
    if (n == 0) return payload;
    payload.append(buffer, static_cast<size_t>(n));
  }
  return absl::InvalidArgumentError("the secrets on descriptor " + name + " exceed " +
                                    std::to_string(kMaxSecretBytes) + " bytes");
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> TakeInheritedSecrets(int64_t timeout_ms) {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  std::map<std::string, std::string> secrets;
  const char* named = std::getenv(kSecretsFdEnv);
  if (named == nullptr) return secrets;
  std::string fd_text = named;
  unsetenv(kSecretsFdEnv);
  int fd = -1;
  if (!absl::SimpleAtoi(fd_text, &fd) || fd <= STDERR_FILENO) {
    return absl::InvalidArgumentError(std::string(kSecretsFdEnv) + "=" + fd_text + " is not a descriptor");
  }
  absl::StatusOr<std::string> payload = ReadSecretsPipe(fd, fd_text, deadline);
  close(fd);
  if (!payload.ok()) return payload.status();
  std::vector<std::string> fields = absl::StrSplit(*payload, '\0');
  // name, value, ..., then the empty field after the last NUL.
  if (fields.size() % 2 != 1 || !fields.back().empty()) {
    return absl::InvalidArgumentError("malformed secrets on descriptor " + fd_text);
  }
  for (size_t i = 0; i + 1 < fields.size(); i += 2) secrets[fields[i]] = fields[i + 1];
  return secrets;
}

bool IsProcessAlive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie still answers kill(0); look at its state.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= line.size()) return true;
  char state = line[close_paren + 2];
  return state != 'Z' && state != 'X';
}

std::string ProcessCommandLine(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

absl::Status SignalProcess(pid_t pid, int signal) {
  if (pid <= 0) return absl::InvalidArgumentError("bad pid " + std::to_string(pid));
  if (kill(pid, signal) != 0 && errno != ESRCH) {
    return absl::InternalError("kill " + std::to_string(pid) + ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

bool ReapIfExited(pid_t pid) {
  int status;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return true;
  return !IsProcessAlive(pid);
}

namespace {

// Waits for a process to end, checking `ended()` until it says so or `timeout_ms`
// passed; whether it did. A pidfd turns readable the moment the process ends (ours
// or not), so the wait ends then, not at the next poll; without one (an old
// kernel), it polls with backoff.
template <typename Ended>
bool AwaitEnd(pid_t pid, int64_t timeout_ms, Ended ended) {
  const int64_t deadline = MonotonicMs() + timeout_ms;
  const int pidfd = pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, pid, 0)) : -1;
  int64_t sleep_us = 200;
  bool done = false;
  while (!(done = ended())) {
    const int64_t left_ms = deadline - MonotonicMs();
    if (left_ms <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      (void)poll(&p, 1, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(sleep_us, left_ms * 1000)));
      sleep_us = std::min<int64_t>(sleep_us * 2, 50000);
    }
  }
  if (pidfd >= 0) close(pidfd);
  return done;
}

}  // namespace

bool WaitForExit(pid_t pid, int64_t timeout_ms) {
  return AwaitEnd(pid, timeout_ms, [pid] { return ReapIfExited(pid); });
}

absl::StatusOr<int> WaitForChildExit(pid_t pid, int64_t timeout_ms) {
  int status = 0;
  pid_t reaped = 0;
  const bool ended = AwaitEnd(pid, timeout_ms, [&] {
    reaped = waitpid(pid, &status, WNOHANG);
    return reaped != 0;
  });
  if (!ended) return absl::DeadlineExceededError("process " + std::to_string(pid) + " still runs");
  if (reaped < 0) return absl::InternalError("waiting for process " + std::to_string(pid) + ": " + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string SelfExecutablePath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

std::string FindExecutable(const std::string& name) {
  auto is_exec = [](const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  std::string self = SelfExecutablePath();
  size_t slash = self.rfind('/');
  if (slash != std::string::npos) {
    std::string dir = self.substr(0, slash);
    // Next to us (install prefix bin/ or a flat build dir), then sibling build folders.
    for (const std::string& candidate :
         {dir + "/" + name, dir + "/../gcs/" + name, dir + "/../raylet/" + name,
          dir + "/../cli/" + name, dir + "/../core_worker/" + name, dir + "/../api/" + name,
          dir + "/../dashboard/" + name,
          dir + "/../src/gcs/" + name, dir + "/../src/raylet/" + name, dir + "/../src/cli/" + name,
          dir + "/../src/core_worker/" + name, dir + "/../src/api/" + name, dir + "/../../src/gcs/" + name,
          dir + "/../../src/raylet/" + name, dir + "/../../src/cli/" + name,
          dir + "/../../src/core_worker/" + name, dir + "/../../src/api/" + name}) {
      if (is_exec(candidate)) return candidate;
    }
  }
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string p(path);
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string candidate = p.substr(start, end - start) + "/" + name;
    if (is_exec(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

int64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<int64_t>(limit.rlim_cur);
}

}  // namespace manta
