#include "tests/multihost/testbed.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "src/common/util.h"

extern char** environ;

namespace manta::testing {
namespace {

// Starts argv with stdin from `input_file` ("" = /dev/null) and stdout + stderr
// appended to `output_file`.
absl::StatusOr<pid_t> SpawnWithFiles(const std::vector<std::string>& argv, const std::string& input_file,
                                     const std::string& output_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, input_file.empty() ? "/dev/null" : input_file.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return absl::InternalError("cannot start " + argv[0] + ": " + strerror(err));
  return pid;
}

// Waits for `pid`, killing it after `timeout_ms`; the exit code (-1 on timeout).
int WaitExit(pid_t pid, int64_t timeout_ms) {
  int status = 0;
  bool done = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout_ms);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Slurp(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? *text : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<TestBed>> TestBed::Up(int num_hosts, int mtu) {
  std::unique_ptr<TestBed> bed(new TestBed());
  bed->script_ = std::string(MANTA_SOURCE_DIR) + "/tests/multihost/testbed.sh";
  std::string out = bed->outputs_.path() + "/up";
  // The hosts run this checkout's binaries: they must see it even when it lies under
  // /tmp, which each host has its own of.
  auto pid = SpawnWithFiles({bed->script_, "up", std::to_string(num_hosts), "--owner", std::to_string(getpid()),
                             "--mtu", std::to_string(mtu), "--keep", MANTA_SOURCE_DIR, "--keep", MANTA_BUILD_DIR},
                            "", out);
  if (!pid.ok()) return pid.status();
  int code = WaitExit(*pid, 60000);
  std::string text = Slurp(out);
  std::istringstream lines(text);
  std::string word;
  while (lines >> word) {
    if (word == "testbed") {
      lines >> bed->id_;
    } else if (word == "host") {
      int index = 0;
      std::string ip;
      pid_t init = 0;
      lines >> index >> ip >> init;
      bed->ips_.push_back(ip);
      bed->init_pids_.push_back(init);
    }
  }
  if (code != 0 || bed->id_.empty() || static_cast<int>(bed->ips_.size()) != num_hosts) {
    return absl::FailedPreconditionError("testbed.sh up " + std::to_string(num_hosts) + " failed (exit " +
                                         std::to_string(code) + "):\n" + text);
  }
  return bed;
}

TestBed::~TestBed() {
  if (!id_.empty()) (void)Run({"down", id_}, 60000);
}

absl::Status TestBed::Run(const std::vector<std::string>& args, int64_t timeout_ms) {
  std::vector<std::string> argv = {script_};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out = outputs_.path() + "/cmd" + std::to_string(next_output_++);
  auto pid = SpawnWithFiles(argv, "", out);
  if (!pid.ok()) return pid.status();
  int code = WaitExit(*pid, timeout_ms);
  if (code != 0) return absl::InternalError("testbed.sh " + args[0] + " failed (exit " + std::to_string(code) + "): " + Slurp(out));
  return absl::OkStatus();
}

std::vector<std::string> TestBed::Command(int host, const std::vector<std::string>& argv, const Env& env) const {
  // A clean environment, as on a fresh machine.
  std::vector<std::string> command = {script_, "exec", id_, std::to_string(host), "--", "/usr/bin/env", "-i",
                                      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                      "HOME=/root"};
  for (const auto& [name, value] : env) command.push_back(name + "=" + value);
  command.insert(command.end(), argv.begin(), argv.end());
  return command;
}

CommandResult TestBed::Exec(int host, const std::vector<std::string>& argv, const Env& env, int64_t timeout_ms,
                            const std::string& input) {
  CommandResult result;
  const std::string base = outputs_.path() + "/exec" + std::to_string(next_output_++);
  std::string input_file;
  if (!input.empty()) {
    input_file = base + ".in";
    if (absl::Status s = WriteFileAtomic(input_file, input, 0600); !s.ok()) {
      result.output = std::string(s.message());
      return result;
    }
  }
  auto pid = SpawnWithFiles(Command(host, argv, env), input_file, base + ".out");
  if (!pid.ok()) {
    result.output = std::string(pid.status().message());
    return result;
  }
  result.exit_code = WaitExit(*pid, timeout_ms);
  result.output = Slurp(base + ".out");
  if (!input_file.empty()) unlink(input_file.c_str());
  return result;
}

absl::StatusOr<TestBed::Process> TestBed::Spawn(int host, const std::vector<std::string>& argv, const Env& env) {
  Process process;
  process.output_file = outputs_.path() + "/spawn" + std::to_string(next_output_++) + ".out";
  auto pid = SpawnWithFiles(Command(host, argv, env), "", process.output_file);
  if (!pid.ok()) return pid.status();
  process.pid = *pid;
  return process;
}

CommandResult TestBed::Wait(const Process& process, int64_t timeout_ms) {
  CommandResult result;
  result.exit_code = WaitExit(process.pid, timeout_ms);
  result.output = Slurp(process.output_file);
  return result;
}

std::string TestBed::OutputOf(const Process& process) const { return Slurp(process.output_file); }

absl::Status TestBed::KillHost(int host) { return Run({"kill", id_, std::to_string(host)}); }

absl::Status TestBed::Partition(int host, const std::vector<int>& peers) {
  std::vector<std::string> args = {"partition", id_, std::to_string(host)};
  for (int p : peers) args.push_back(std::to_string(p));
  return Run(args);
}

absl::Status TestBed::Heal(int host) { return Run({"heal", id_, std::to_string(host)}); }

absl::Status TestBed::Shape(int host, const std::string& rate) { return Run({"shape", id_, std::to_string(host), rate}); }

absl::StatusOr<TestBed::Process> TestBed::StartCapture(const std::string& pcap_file) {
  Process capture;
  capture.output_file = outputs_.path() + "/capture" + std::to_string(next_output_++);
  auto pid = SpawnWithFiles({script_, "capture", id_, pcap_file}, "", capture.output_file);
  if (!pid.ok()) return pid.status();
  capture.pid = *pid;
  // tcpdump says so on stderr once it captures.
  if (!WaitFor([&] { return Slurp(capture.output_file).find("listening on") != std::string::npos; }, 10000)) {
    WaitExit(capture.pid, 0);
    return absl::InternalError("tcpdump did not start: " + Slurp(capture.output_file));
  }
  return capture;
}

absl::Status TestBed::StopCapture(const Process& capture) {
  kill(capture.pid, SIGINT);  // tcpdump writes what it holds and exits
  int code = WaitExit(capture.pid, 10000);
  const std::string said = Slurp(capture.output_file);
  if (code != 0) return absl::InternalError("tcpdump exited with " + std::to_string(code) + ": " + said);
  // A capture that lost packets proves nothing about what crossed.
  std::smatch dropped;
  if (std::regex_search(said, dropped, std::regex("(\\d+) packets? dropped by kernel")) && dropped[1] != "0") {
    return absl::DataLossError("tcpdump lost packets: " + said);
  }
  return absl::OkStatus();
}

}  // namespace manta::testing
