// TestBed: several hosts on one machine for Manta's multi-host tests (label
// `multihost`), driven through tests/multihost/testbed.sh.
//
// Each host is a network namespace with its own address in 198.51.100.0/24, joined
// to the others through a bridge, with its own mount and pid namespaces (private
// /tmp and /dev/shm): nothing can work by accident through a shared file system or
// pid space. Commands run on a host with a clean environment (PATH, HOME and what
// the caller adds), as on a fresh machine. The whole bed is torn down by its id when
// the TestBed is destroyed, and by testbed.sh's watchdog if this process dies first.
//
// Thread-compatible: one test thread drives it.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "test_util/test_util.h"

namespace manta::testing {

class TestBed {
 public:
  using Env = std::map<std::string, std::string>;

  // Makes `num_hosts` hosts (host 0 is 198.51.100.10, host 1 .11, ...). The error
  // says what is missing when this machine cannot (not root, no nftables, ...).
  // `mtu`: of every link (the bridge's default is 9000, jumbo frames as in a data
  // centre; 1500 as on most networks).
  static absl::StatusOr<std::unique_ptr<TestBed>> Up(int num_hosts, int mtu = 9000);
  ~TestBed();
  TestBed(const TestBed&) = delete;
  TestBed& operator=(const TestBed&) = delete;

  const std::string& id() const { return id_; }
  int num_hosts() const { return static_cast<int>(ips_.size()); }
  const std::string& Ip(int host) const { return ips_.at(host); }
  // The pid, in this machine's pid namespace, of the host's pid-namespace init as
  // the bed was made (every process of the host shares its /proc/<pid>/ns/pid).
  pid_t InitPid(int host) const { return init_pids_.at(host); }

  // Runs `argv` on `host` to completion (at most `timeout_ms`), with `input` on its
  // standard input. Output is stdout and stderr together.
  CommandResult Exec(int host, const std::vector<std::string>& argv, const Env& env = {},
                     int64_t timeout_ms = 60000, const std::string& input = "");

  // A command left running on a host: Wait() collects it.
  struct Process {
    pid_t pid = 0;  // of the local nsenter that runs it
    std::string output_file;
  };
  absl::StatusOr<Process> Spawn(int host, const std::vector<std::string>& argv, const Env& env = {});
  // Waits for it to exit (SIGKILL after `timeout_ms`, exit code -1).
  CommandResult Wait(const Process& process, int64_t timeout_ms);
  // Its output so far.
  std::string OutputOf(const Process& process) const;

  // Every process of the host dies at once (its pid namespace's init is killed).
  absl::Status KillHost(int host);
  // Drops every packet between `host` and the others (or only `peers`), both ways.
  absl::Status Partition(int host, const std::vector<int>& peers = {});
  absl::Status Heal(int host);
  // Limits the host's link to `rate` (tc syntax, e.g. "100mbit"); "off" lifts it.
  absl::Status Shape(int host, const std::string& rate);
  // Captures every packet crossing the bridge into `pcap_file` (tcpdump) from when
  // this returns until StopCapture.
  absl::StatusOr<Process> StartCapture(const std::string& pcap_file);
  // Stops it; the file then holds every packet captured. DataLoss when tcpdump
  // says it lost packets.
  absl::Status StopCapture(const Process& capture);

 private:
  TestBed() = default;
  std::vector<std::string> Command(int host, const std::vector<std::string>& argv, const Env& env) const;
  absl::Status Run(const std::vector<std::string>& args, int64_t timeout_ms = 30000);

  std::string script_;
  std::string id_;
  std::vector<std::string> ips_;
  std::vector<pid_t> init_pids_;
  TempDir outputs_;
  int next_output_ = 0;
};

}  // namespace manta::testing
