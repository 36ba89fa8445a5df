// Helpers shared by Manta's tests: deadlines instead of sleeps, temp directories,
// a real redis-server on a free port, and daemons started by path and stopped by pid.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta::testing {

// Polls `condition` (with short, growing pauses) until it holds or `timeout_ms`
// passes. Returns whether it held. Never a fixed sleep.
bool WaitFor(const std::function<bool()>& condition, int64_t timeout_ms);
// WaitFor until `path` exists.
bool WaitForFile(const std::string& path, int64_t timeout_ms);

// A fresh directory under $TMPDIR (or /tmp), removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets an environment variable (a null value unsets it) for the object's lifetime,
// then restores what it was.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value);
  ScopedEnv(std::string name, const std::string& value) : ScopedEnv(std::move(name), value.c_str()) {}
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Path of a built Manta executable ("manta", "manta_gcs", "manta_raylet").
std::string BinaryPath(const std::string& name);

// A redis-server on a free loopback port, killed (by pid) on destruction.
class RedisServer {
 public:
  // Starts the server and waits (with a deadline) until it answers PING.
  // Fails the current test (ASSERT-style) if it cannot.
  RedisServer();
  ~RedisServer();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

 private:
  int port_ = 0;
  pid_t pid_ = 0;
  TempDir dir_;
};

// A TCP socket listening on 127.0.0.1 at a free port (set in *port); -1 on failure.
int ListenOnLoopback(int* port);
// A TCP connection to host:port (numeric IPv4), or -1 when it is refused.
int ConnectTcp(const std::string& host, int port);
// The same from local address `source` (e.g. 127.0.0.2, to look like another host).
int ConnectTcpFrom(const std::string& source, const std::string& host, int port);

// A TCP connection to "host:port" (numeric IPv4), or -1 when it is refused or malformed.
int ConnectTcp(const std::string& address);

// Descriptors process `pid` has open (from /proc).
int OpenDescriptors(pid_t pid);
// Lowers `pid`'s soft descriptor limit to a few more than it has open, fills its
// table with idle connections to `address` ("host:port"), checks that it ran out and
// is still alive, closes them, and expects `answers` to hold again within 20 s while
// the low limit is still in place. Then restores the limit. Fails the current test
// when any step does not happen.
void ExhaustDescriptors(pid_t pid, const std::string& address, const std::function<bool()>& answers);

// A CA and one certificate for every cluster member (SAN 127.0.0.1 and localhost,
// for both server and client use), plus a certificate of another CA that a cluster
// must refuse ("other.crt", "other.key"), all made with the openssl command in a temp
// directory as an administrator would. Fails the current test if openssl fails.
class TestCertificates {
 public:
  TestCertificates();
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  // --tls-cert/--tls-key/--tls-ca for `manta start`.
  std::vector<std::string> Flags() const;
  // MANTA_TLS_CERT/KEY/CA for drivers and the CLI.
  std::vector<std::pair<std::string, std::string>> Environment() const;

 private:
  TempDir dir_;
};

// Result of running a command to completion.
struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs argv (argv[0] a path) with extra environment, waits up to `timeout_ms`.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env, int64_t timeout_ms);

}  // namespace manta::testing
