#include "test_util/test_util.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "src/common/process.h"
#include "src/common/util.h"
#include "src/gcs/redis_store_client.h"

namespace manta::testing {

bool WaitFor(const std::function<bool()>& condition, int64_t timeout_ms) {
  int64_t deadline = MonotonicMs() + timeout_ms;
  int64_t pause_us = 200;
  for (;;) {
    if (condition()) return true;
    if (MonotonicMs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    pause_us = std::min<int64_t>(pause_us * 2, 50000);
  }
}

bool WaitForFile(const std::string& path, int64_t timeout_ms) {
  return WaitFor([&path] { return std::filesystem::exists(path); }, timeout_ms);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base ? base : "/tmp") + "/manta_test_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* made = mkdtemp(buf.data());
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  path_ = made;
}

TempDir::~TempDir() {
  // MANTA_TEST_KEEP_TMP=1 keeps the folder (daemon logs) for a failed test's post-mortem.
  if (const char* keep = std::getenv("MANTA_TEST_KEEP_TMP"); keep != nullptr && std::string(keep) == "1") {
    fprintf(stderr, "MANTA_TEST_KEEP_TMP: keeping %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

ScopedEnv::ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str()); old != nullptr) old_ = old;
  if (value != nullptr) {
    setenv(name_.c_str(), value, /*overwrite=*/1);
  } else {
    unsetenv(name_.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    setenv(name_.c_str(), old_->c_str(), /*overwrite=*/1);
  } else {
    unsetenv(name_.c_str());
  }
}

std::string BinaryPath(const std::string& name) {
  std::string build = MANTA_BUILD_DIR;
  if (const char* env = std::getenv("MANTA_BUILD_DIR"); env != nullptr && *env) build = env;
  for (const char* dir : {"/src/cli/", "/src/gcs/", "/src/raylet/"}) {
    std::string p = build + dir + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  ADD_FAILURE() << "cannot find built binary " << name << " under " << build;
  return name;
}

RedisServer::RedisServer() {
  std::string exe = FindExecutable("redis-server");
  if (exe.empty()) {
    ADD_FAILURE() << "redis-server is not installed (run scripts/install-deps --test)";
    return;
  }
  for (int attempt = 0; attempt < 5 && pid_ == 0; ++attempt) {
    auto port = PickFreePort();
    if (!port.ok()) continue;
    ProcessOptions p;
    p.argv = {exe, "--port", std::to_string(*port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
              "--dir", dir_.path()};
    p.output_file = dir_.path() + "/redis.out";
    auto pid = StartProcess(p);
    if (!pid.ok()) continue;
    gcs::RedisStoreClient::Options o;
    o.port = *port;
    o.connect_timeout_ms = 200;
    bool up = WaitFor(
        [&] {
          return !ReapIfExited(*pid) && IsPortOpen("127.0.0.1", *port) &&
                 gcs::RedisStoreClient::RunOnce(o, {"PING"}).ok();
        },
        10000);
    if (up) {
      pid_ = *pid;
      port_ = *port;
    } else {
      kill(*pid, SIGKILL);
      WaitForExit(*pid, 5000);
    }
  }
  if (pid_ == 0) ADD_FAILURE() << "could not start redis-server";
}

RedisServer::~RedisServer() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    WaitForExit(pid_, 5000);
  }
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env, int64_t timeout_ms) {
  CommandResult result;
  TempDir dir;
  ProcessOptions p;
  p.argv = argv;
  for (const auto& [k, v] : env) p.env[k] = v;
  p.output_file = dir.path() + "/out";
  auto pid = StartProcess(p);
  if (!pid.ok()) {
    result.output = std::string(pid.status().message());
    return result;
  }
  int status = 0;
  bool done = WaitFor(
      [&] {
        pid_t r = waitpid(*pid, &status, WNOHANG);
        return r == *pid;
      },
      timeout_ms);
  if (!done) {
    kill(*pid, SIGKILL);
    waitpid(*pid, &status, 0);
    result.exit_code = -1;
  } else {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  auto out = ReadFile(dir.path() + "/out");
  if (out.ok()) result.output = *out;
  return result;
}

int ListenOnLoopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

int ConnectTcp(const std::string& host, int port) { return ConnectTcpFrom("", host, port); }

int ConnectTcpFrom(const std::string& source, const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if ((!source.empty() && (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
                           bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0)) ||
      inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ConnectTcp(const std::string& address) {
  auto hp = ParseHostPort(address);
  return hp.ok() ? ConnectTcp(hp->host, hp->port) : -1;
}

int OpenDescriptors(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::end(it); it.increment(ec)) {
    ++n;
  }
  return n;
}

void ExhaustDescriptors(pid_t pid, const std::string& address, const std::function<bool()>& answers) {
  rlimit old_limit{};
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, nullptr, &old_limit), 0) << std::strerror(errno);
  rlimit low = old_limit;
  low.rlim_cur = static_cast<rlim_t>(OpenDescriptors(pid) + 16);
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
  std::vector<int> connections;
  for (int i = 0; i < 64; ++i) {
    int fd = ConnectTcp(address);  // completes in the kernel's backlog even when not accepted
    if (fd >= 0) connections.push_back(fd);
  }
  EXPECT_TRUE(WaitFor([&] { return OpenDescriptors(pid) >= static_cast<int>(low.rlim_cur) - 1; }, 10000))
      << "the daemon never ran out: " << OpenDescriptors(pid) << " of " << low.rlim_cur;
  EXPECT_EQ(kill(pid, 0), 0) << "out of descriptors, the daemon died";
  for (int fd : connections) close(fd);
  // With the same low limit, new connections are accepted again.
  EXPECT_TRUE(WaitFor(answers, 20000)) << "the daemon did not accept again after running out of descriptors";
  ASSERT_EQ(prlimit(pid, RLIMIT_NOFILE, &old_limit, nullptr), 0);
}

TestCertificates::TestCertificates() {
  const std::string script =
      "set -e; cd '" + dir_.path() +
      "'; "
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt "
      "-days 2 -subj /CN=manta-test-ca; "
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout node.key -out node.csr "
      "-subj /CN=manta-node; "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext.cnf; "
      "openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out node.crt -days 2 "
      "-extfile ext.cnf; "
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout other.key -out other.crt "
      "-days 2 -subj /CN=not-the-cluster-ca -addext subjectAltName=IP:127.0.0.1; "
      "chmod 600 *.key";
  CommandResult r = RunCommand({"/bin/sh", "-c", script}, {}, 60000);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

std::vector<std::string> TestCertificates::Flags() const {
  return {"--tls-cert", Path("node.crt"), "--tls-key", Path("node.key"), "--tls-ca", Path("ca.crt")};
}

std::vector<std::pair<std::string, std::string>> TestCertificates::Environment() const {
  return {{"MANTA_TLS_CERT", Path("node.crt")}, {"MANTA_TLS_KEY", Path("node.key")}, {"MANTA_TLS_CA", Path("ca.crt")}};
}

}  // namespace manta::testing
