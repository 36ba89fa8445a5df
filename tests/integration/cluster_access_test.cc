// Who can reach a cluster and how: `manta start --bind-address` decides where every
// daemon and worker listens and `--node-ip-address` what they advertise; joining a
// cluster, inspecting it or running a driver on it takes its token; a cluster started
// with --tls-* speaks only TLS, with certificates this test makes with `openssl`.
// Drivers are this binary run again with --driver (its workers too).
#include <ray/api.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "driver_main.h"
#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "src/api/native_runtime.h"
#include "src/common/cluster_ca.h"
#include "src/common/process.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/core_worker/core_worker.h"

namespace cluster_access_test {
namespace {

using manta::testing::ClusterHarness;
using manta::testing::CommandResult;
using manta::testing::RunCommand;
using manta::testing::TempDir;
using Env = std::vector<std::pair<std::string, std::string>>;

// Where the worker running this task is reached ("ip:port" of its gRPC service).
std::string WorkerAddress() {
  const manta::rpc::Address& a = ray::internal::GetCoreWorkerForTesting()->address();
  return a.ip_address() + ":" + std::to_string(a.port());
}
size_t Length(std::string s) { return s.size(); }
// What any process may read of another: its command line and starting environment.
std::string ProcText(pid_t pid, const std::string& file) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(text.begin(), text.end(), '\0', '\n');
  return text;
}
std::string WhatOthersSee() { return ProcText(getpid(), "cmdline") + ProcText(getpid(), "environ"); }
RAY_REMOTE(WorkerAddress, Length, WhatOthersSee);

// The driver: a task on the head and, when the cluster has one, a task on the node
// offering "second" that reads a 5 MB object put here (it moves between nodes).
// Prints one line per task: "head <worker address>", "second <address> <length>".
int RunDriver(const std::string& address, bool second_node) {
  ray::RayConfig config;
  config.address = address;
  try {
    ray::Init(config);
    std::cout << "head " << *ray::Task(WorkerAddress).Remote().Get() << std::endl;
    if (second_node) {
      ray::ObjectRef<std::string> big = ray::Put(std::string(5 << 20, 'b'));
      std::string where = *ray::Task(WorkerAddress).SetResource("second", 1).Remote().Get();
      size_t length = *ray::Task(Length).SetResource("second", 1).Remote(big).Get();
      std::cout << "second " << where << " " << length << std::endl;
    }
    ray::Shutdown();
  } catch (const std::exception& e) {
    std::cout << "driver failed: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

// A driver whose command line carries Ray's secret flags (its workers are started from
// it): prints what others can read of the worker that runs its task.
int RunSecretsDriver(const std::string& address, int argc, char** argv) {
  ray::RayConfig config;
  config.address = address;
  try {
    ray::Init(config, argc, argv);
    std::cout << "worker sees:\n" << *ray::Task(WhatOthersSee).Remote().Get() << std::endl;
    ray::Shutdown();
  } catch (const std::exception& e) {
    std::cout << "driver failed: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}

CommandResult Driver(const std::string& address, bool second_node, const Env& env) {
  std::vector<std::string> argv = {manta::SelfExecutablePath(), "--driver", address};
  if (second_node) argv.push_back("--second");
  return RunCommand(argv, env, 120000);
}

bool CanConnect(const std::string& host, int port) {
  int fd = manta::testing::ConnectTcp(host, port);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

int PortOf(const std::string& address) { return manta::ParseHostPort(address)->port; }

std::string SessionTokenFile(const ClusterHarness& harness) { return harness.HeadSessionDir() + "/cluster_token"; }

TEST(ClusterAccessTest, TheBindAddressIsWhereEveryDaemonAndWorkerListens) {
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead({"--num-cpus=1", "--bind-address", "127.0.0.2"});
  ASSERT_EQ(gcs.rfind("127.0.0.2:", 0), 0u) << gcs;
  cluster.StartNode({"--num-cpus=1", "--node-ip-address", "127.0.0.3", "--resources", R"({"second": 1})"});
  EXPECT_TRUE(CanConnect("127.0.0.2", PortOf(gcs)));
  EXPECT_FALSE(CanConnect("127.0.0.1", PortOf(gcs))) << "the GCS listens beyond its bind address";
  std::vector<std::string> node_addresses;
  for (const auto& node : cluster.AliveNodes()) {
    node_addresses.push_back(node.node_manager_address());
    EXPECT_TRUE(CanConnect(node.node_manager_address(), node.node_manager_port()));
    EXPECT_FALSE(CanConnect("127.0.0.1", node.node_manager_port())) << node.node_manager_address();
  }
  std::sort(node_addresses.begin(), node_addresses.end());
  EXPECT_EQ(node_addresses, (std::vector<std::string>{"127.0.0.2", "127.0.0.3"}));

  CommandResult r = Driver(gcs, true, {{"MANTA_CLUSTER_TOKEN", cluster.token()}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Each worker listens (and is reached) at its node's address only.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("head 127\\.0\\.0\\.2:(\\d+)"))) << r.output;
  EXPECT_FALSE(CanConnect("127.0.0.1", std::stoi(m[1])));
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("second 127\\.0\\.0\\.3:(\\d+) 5242880"))) << r.output;
  EXPECT_FALSE(CanConnect("127.0.0.1", std::stoi(m[1])));
}

TEST(ClusterAccessTest, BindingEveryInterfaceAdvertisesTheNodeAddress) {
  ClusterHarness cluster;
  CommandResult start = cluster.Manta({"start", "--head", "--port", "0", "--num-cpus=1", "--object-store-memory",
                                       std::to_string(64 << 20), "--bind-address", "0.0.0.0", "--node-ip-address",
                                       "127.0.0.4"});
  ASSERT_EQ(start.exit_code, 0) << start.output;
  EXPECT_NE(start.output.find("Listening on:     0.0.0.0"), std::string::npos) << start.output;
  EXPECT_NE(start.output.find("must present the cluster token"), std::string::npos) << start.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(start.output, m, std::regex("GCS address:\\s+(127\\.0\\.0\\.4:\\d+)"))) << start.output;
  std::string gcs = m[1];
  EXPECT_TRUE(CanConnect("127.0.0.1", PortOf(gcs)));
  EXPECT_TRUE(CanConnect("127.0.0.4", PortOf(gcs)));
  auto token = manta::FindSessionToken(cluster.temp_root(), gcs);
  ASSERT_TRUE(token.ok()) << token.status();
  CommandResult r = Driver(gcs, false, {{"MANTA_CLUSTER_TOKEN", *token}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("head 127.0.0.4:"), std::string::npos) << r.output;
}

TEST(ClusterAccessTest, AddressesThatCannotWorkAreRefused) {
  ClusterHarness cluster;
  CommandResult r = cluster.Manta({"start", "--head", "--port", "0", "--node-ip-address", "192.0.2.77"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bind-address"), std::string::npos) << r.output;
  r = cluster.Manta({"start", "--head", "--port", "0", "--bind-address", "127.0.0.5", "--node-ip-address",
                     "127.0.0.6"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("would listen on 127.0.0.5"), std::string::npos) << r.output;
  r = cluster.Manta({"start", "--head", "--port", "0", "--bind-address", "0.0.0.0", "--node-ip-address", "0.0.0.0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not an address other processes can reach"), std::string::npos) << r.output;
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(ClusterAccessTest, JoiningInspectingAndDrivingTakeTheToken) {
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead({"--num-cpus=1"});
  std::string wrong = manta::NewClusterToken();
  // Another machine, as far as Manta can tell: a temp root with no session of this
  // cluster, and no token in the environment.
  ClusterHarness elsewhere;
  const Env no_token = {{"MANTA_CLUSTER_TOKEN", ""}};
  CommandResult r = elsewhere.Manta({"start", "--address", gcs, "--num-cpus=1"}, no_token);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no cluster token"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--token-file"), std::string::npos) << r.output;
  r = elsewhere.Manta({"start", "--address", gcs, "--num-cpus=1"}, {{"MANTA_CLUSTER_TOKEN", wrong}});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("token"), std::string::npos) << r.output;
  EXPECT_TRUE(elsewhere.LivePids().empty());
  r = elsewhere.Manta({"status", "--address", gcs}, {{"MANTA_CLUSTER_TOKEN", wrong}});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("wrong cluster token"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("TLS"), std::string::npos) << "a wrong token is not a TLS problem: " << r.output;
  r = Driver(gcs, false, {{"MANTA_CLUSTER_TOKEN", ""}, {"MANTA_TEMP_DIR", elsewhere.temp_root()}});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no cluster token"), std::string::npos) << r.output;
  r = Driver(gcs, false, {{"MANTA_CLUSTER_TOKEN", wrong}, {"MANTA_TEMP_DIR", elsewhere.temp_root()}});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("token"), std::string::npos) << r.output;
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 1);

  // With the token file copied over, the node joins and a driver uses it.
  r = elsewhere.Manta({"start", "--address", gcs, "--num-cpus=1", "--resources", R"({"second": 1})", "--token-file",
                       SessionTokenFile(cluster), "--object-store-memory", std::to_string(64 << 20)},
                      no_token);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 2);
  r = elsewhere.Manta({"status", "--address", gcs, "--token-file", SessionTokenFile(cluster)}, no_token);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = Driver(gcs, true, {{"MANTA_CLUSTER_TOKEN", ""}, {"MANTA_CLUSTER_TOKEN_FILE", SessionTokenFile(cluster)},
                         {"MANTA_TEMP_DIR", elsewhere.temp_root()}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 5242880"), std::string::npos) << r.output;

  // Without TLS the workers' task channels are authenticated, not encrypted: a driver
  // that requires encryption gets nothing run, and is told why.
  r = Driver(gcs, false, {{"MANTA_CLUSTER_TOKEN", cluster.token()}, {"MANTA_task_channel_protection", "encrypt"}});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cannot run the task: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'mac', weaker than the 'encrypt' this process requires"), std::string::npos) << r.output;
}

TEST(ClusterAccessTest, NoProcessShowsASecretInItsEnvironmentOrCommandLine) {
  const std::string redis_password = "redis-pw-from-the-environment-4711";
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead({"--num-cpus=1"}, {{"MANTA_REDIS_PASSWORD", redis_password}});
  const std::vector<std::string> secrets = {redis_password, cluster.token(), "flag-pw-1", "flag-pw-2",
                                            "MANTA_WORKER_STARTUP_TOKEN", "MANTA_CLUSTER_TOKEN", "MANTA_REDIS_PASSWORD"};
  CommandResult r = RunCommand({manta::SelfExecutablePath(), "--secrets-driver", gcs, "--ray_redis_password=flag-pw-1",
                                "--ray_redis_password", "flag-pw-2"},
                               {{"MANTA_CLUSTER_TOKEN", cluster.token()}}, 120000);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t seen = r.output.find("worker sees:\n");
  ASSERT_NE(seen, std::string::npos) << r.output;
  std::string worker = r.output.substr(seen);
  // What was read is the worker's: its command line (the driver's) and its environment.
  ASSERT_NE(worker.find("--secrets-driver"), std::string::npos) << worker;
  ASSERT_NE(worker.find("MANTA_WORKER_MODE=1"), std::string::npos) << worker;
  std::vector<pid_t> daemons = cluster.LivePids();
  ASSERT_GE(daemons.size(), 3u);  // Redis, the GCS, the raylet
  for (const std::string& secret : secrets) {
    EXPECT_EQ(worker.find(secret), std::string::npos) << secret << " is readable in a worker's /proc:\n" << worker;
    for (pid_t pid : daemons) {
      std::string text = ProcText(pid, "cmdline") + ProcText(pid, "environ");
      EXPECT_EQ(text.find(secret), std::string::npos) << secret << " is readable in /proc/" << pid << ":\n" << text;
    }
  }
  // The head took the password from the environment (its GCS reached Redis with it).
  std::string stored = manta::ReadFile(cluster.HeadSessionDir() + "/redis_password").value_or("");
  EXPECT_EQ(stored.substr(0, stored.find('\n')), redis_password);
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 1);
}

TEST(ClusterAccessTest, ATlsClusterSpeaksOnlyTls) {
  manta::testing::TestCertificates certs;
  // The harness's own `manta status` calls inherit this process's environment.
  for (const auto& [name, value] : certs.Environment()) setenv(name.c_str(), value.c_str(), 1);
  ClusterHarness cluster;
  std::vector<std::string> head_flags = certs.Flags();
  head_flags.push_back("--num-cpus=1");
  std::string gcs = cluster.StartHead(head_flags);
  std::vector<std::string> node_flags = certs.Flags();
  node_flags.insert(node_flags.end(), {"--num-cpus=1", "--resources", R"({"second": 1})"});
  cluster.StartNode(node_flags);
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 2);

  // A driver with the cluster's certificates: tasks on both nodes, and an object
  // moved between them over TLS. It requires encrypted task channels, which the
  // workers of a TLS cluster use unasked (an owner refuses a weaker worker).
  Env with_tls = certs.Environment();
  with_tls.emplace_back("MANTA_CLUSTER_TOKEN", cluster.token());
  with_tls.emplace_back("MANTA_task_channel_protection", "encrypt");
  CommandResult r = Driver(gcs, true, with_tls);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 5242880"), std::string::npos) << r.output;

  // Without TLS, or with a certificate of another CA, nothing gets through, even
  // with the token; the error says what to check.
  const Env plaintext = {{"MANTA_TLS_CERT", ""}, {"MANTA_TLS_KEY", ""}, {"MANTA_TLS_CA", ""}};
  r = cluster.Manta({"status", "--address", gcs}, plaintext);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MANTA_TLS_CERT"), std::string::npos) << r.output;
  Env plaintext_driver = plaintext;
  plaintext_driver.emplace_back("MANTA_CLUSTER_TOKEN", cluster.token());
  r = Driver(gcs, false, plaintext_driver);
  EXPECT_NE(r.exit_code, 0) << r.output;
  const Env foreign = {{"MANTA_TLS_CERT", certs.Path("other.crt")},
                       {"MANTA_TLS_KEY", certs.Path("other.key")},
                       {"MANTA_TLS_CA", certs.Path("ca.crt")}};
  r = cluster.Manta({"status", "--address", gcs}, foreign);
  EXPECT_NE(r.exit_code, 0) << r.output;
  // Only two of the three files: a clear error before anything is tried.
  r = cluster.Manta({"status", "--address", gcs}, {{"MANTA_TLS_CA", ""}});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MANTA_TLS_CA"), std::string::npos) << r.output;

  // A connection that never starts its TLS handshake is closed after about 10 s.
  int silent = manta::testing::ConnectTcp("127.0.0.1", PortOf(gcs));
  ASSERT_GE(silent, 0);
  timeval tv{1, 0};
  setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  EXPECT_TRUE(manta::testing::WaitFor(
      [silent] {
        char c;
        ssize_t n = recv(silent, &c, 1, 0);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      },
      25000))
      << "a connection without a TLS handshake stayed open";
  close(silent);

  // Out of descriptors, the GCS pauses accepting TLS connections, and resumes.
  std::vector<pid_t> gcs_pids = cluster.Pids("gcs");
  ASSERT_EQ(gcs_pids.size(), 1u);
  manta::testing::ExhaustDescriptors(gcs_pids[0], gcs, [&cluster] { return cluster.CountNodes("ALIVE") == 2; });

  EXPECT_EQ(cluster.CountNodes("ALIVE"), 2);
  for (const auto& [name, value] : certs.Environment()) unsetenv(name.c_str());
}

// Whether `path` exists with exactly `mode` permission bits.
bool HasMode(const std::string& path, mode_t mode) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & 07777) == mode;
}

TEST(ClusterAccessTest, WithTlsDueTheHeadMakesACaAndMembersGetCertificatesByProvingTheToken) {
  // cluster_tls=on makes a loopback cluster do what one bound to another address
  // does by default ('auto').
  const Env tls_on = {{"MANTA_cluster_tls", "on"}};
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead({"--num-cpus=1"}, tls_on);
  const std::string tls = cluster.HeadSessionDir() + "/tls/";
  EXPECT_TRUE(HasMode(tls + "ca.key", 0600));
  EXPECT_TRUE(HasMode(tls + "node.key", 0600));
  const std::string ca = manta::ReadFile(tls + "ca.crt").value_or("");
  EXPECT_TRUE(manta::VerifyCertificate(manta::ReadFile(tls + "node.crt").value_or(""), ca).ok());

  // Another machine, as far as Manta can tell: no session of this cluster, no token.
  ClusterHarness elsewhere;
  const std::string token_file = SessionTokenFile(cluster);
  // In plaintext, nothing: the GCS speaks TLS only (and the token is not sent).
  CommandResult r = elsewhere.Manta({"status", "--address", gcs, "--token-file", token_file},
                                    {{"MANTA_cluster_tls", "off"}, {"MANTA_CLUSTER_TOKEN", ""}});
  EXPECT_NE(r.exit_code, 0) << r.output;
  // A wrong token gets no certificate, and is told why.
  r = elsewhere.Manta({"status", "--address", gcs},
                      {{"MANTA_cluster_tls", "on"}, {"MANTA_CLUSTER_TOKEN", manta::NewClusterToken()}});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("does not prove the token this process holds"), std::string::npos) << r.output;

  // With the token file, a node joins: it proves the token, gets a certificate of the
  // head's CA for a key of its own, and keeps it in its session.
  r = elsewhere.Manta({"start", "--address", gcs, "--num-cpus=1", "--resources", R"({"second": 1})", "--token-file",
                       token_file, "--object-store-memory", std::to_string(64 << 20)},
                      {{"MANTA_cluster_tls", "on"}, {"MANTA_CLUSTER_TOKEN", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("TLS:              on, certificates of the cluster's own CA"), std::string::npos)
      << r.output;
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 2);
  auto joined = manta::FindClusterSession(gcs, elsewhere.temp_root());
  ASSERT_TRUE(joined.ok()) << joined.status();
  const std::string joined_cert = manta::ReadFile(*joined + "/tls/node.crt").value_or("");
  EXPECT_TRUE(manta::VerifyCertificate(joined_cert, ca).ok());
  EXPECT_NE(manta::ReadFile(*joined + "/tls/node.key").value_or(""), manta::ReadFile(tls + "node.key").value_or(""));

  // A driver on a third machine enrolls too: tasks on both nodes, an object moved
  // between them, over task channels its workers encrypt unasked.
  TempDir third;
  r = Driver(gcs, true,
             {{"MANTA_CLUSTER_TOKEN", ""}, {"MANTA_CLUSTER_TOKEN_FILE", token_file}, {"MANTA_TEMP_DIR", third.path()},
              {"MANTA_cluster_tls", "on"}, {"MANTA_task_channel_protection", "encrypt"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" 5242880"), std::string::npos) << r.output;
  // The GCS issued a certificate to the node and one to the driver.
  std::string logs = RunCommand({"/bin/sh", "-c", "cat " + cluster.HeadSessionDir() + "/logs/*gcs*"}, {}, 10000).output;
  size_t issued = 0;
  for (size_t at = logs.find("issued a certificate"); at != std::string::npos;
       at = logs.find("issued a certificate", at + 1)) {
    ++issued;
  }
  EXPECT_GE(issued, 2u) << logs;
}


// The drivers these tests start: --secrets-driver <file> and --driver <address> [--second].
const bool kChildMode = manta::testing::AddChildMode([](int argc, char** argv) -> std::optional<int> {
  if (argc >= 3 && std::string(argv[1]) == "--secrets-driver") return RunSecretsDriver(argv[2], argc, argv);
  if (argc >= 3 && std::string(argv[1]) == "--driver") {
    return RunDriver(argv[2], argc >= 4 && std::string(argv[3]) == "--second");
  }
  return std::nullopt;
});

}  // namespace
}  // namespace cluster_access_test
