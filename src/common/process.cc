#include "src/common/process.h"

#include <fcntl.h>
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

#include "src/common/util.h"

extern char** environ;

namespace manta {

absl::StatusOr<pid_t> StartProcess(const ProcessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to start");
  // Build everything the child needs before fork: after fork only async-signal-safe
  // calls are allowed.
  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env_map[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) env_map[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env_map) env_strings.push_back(k + "=" + v);
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

  int out_fd = -1;
  if (!options.output_file.empty()) {
    out_fd = open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (out_fd < 0) {
      return absl::InternalError("cannot open " + options.output_file + ": " + std::strerror(errno));
    }
  }
  // A CLOEXEC pipe tells the parent whether exec succeeded: it closes on exec, or
  // carries {stage, errno} on failure (stage 1: chdir, 2: exec). A detached start's
  // intermediate process sends {0, pid of the child} first.
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    if (out_fd >= 0) close(out_fd);
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent_pid = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    if (out_fd >= 0) close(out_fd);
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::InternalError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    close(err_pipe[0]);
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      // The parent may have died before prctl took effect: then we were reparented.
      if (getppid() != parent_pid) _exit(127);
    }
    if (options.new_session || options.detach) setsid();
    if (options.detach) {
      const pid_t child = fork();
      if (child != 0) {
        int record[2] = {child < 0 ? 3 : 0, child < 0 ? errno : static_cast<int>(child)};
        ssize_t ignored = write(err_pipe[1], record, sizeof(record));
        (void)ignored;
        _exit(child < 0 ? 127 : 0);
      }
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    }
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    int failure[2] = {2, 0};
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) {
      failure[0] = 1;
    } else {
      execvpe(argv[0], argv.data(), envp.data());
    }
    failure[1] = errno;
    ssize_t ignored = write(err_pipe[1], failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  }
  close(err_pipe[1]);
  if (out_fd >= 0) close(out_fd);
  int failure[2] = {0, 0};
  ssize_t n;
  auto read_record = [&] {
    do {
      n = read(err_pipe[0], failure, sizeof(failure));
    } while (n < 0 && errno == EINTR);
  };
  read_record();
  if (options.detach) {
    waitpid(pid, nullptr, 0);  // the intermediate, gone once it sent the record
    if (n == sizeof(failure) && failure[0] == 0) {
      pid = failure[1];
      read_record();  // the child's failure, or end of file once it has exec'd
    } else if (n == sizeof(failure) && failure[0] == 3) {
      close(err_pipe[0]);
      return absl::InternalError(std::string("fork: ") + std::strerror(failure[1]));
    }
  }
  close(err_pipe[0]);
  if (n == sizeof(failure)) {
    if (!options.detach) waitpid(pid, nullptr, 0);
    if (failure[0] == 1) {
      return absl::FailedPreconditionError("cannot start " + options.argv[0] + " in working directory " +
                                           options.working_dir + ": " + std::strerror(failure[1]));
    }
    return absl::NotFoundError("cannot execute " + options.argv[0] + ": " + std::strerror(failure[1]));
  }
  return pid;
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

bool WaitForExit(pid_t pid, int64_t timeout_ms) {
  int64_t deadline = MonotonicMs() + timeout_ms;
  int64_t sleep_us = 1000;
  while (true) {
    if (ReapIfExited(pid)) return true;
    if (MonotonicMs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min<int64_t>(sleep_us * 2, 50000);
  }
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
