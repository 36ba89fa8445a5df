// The container image's entry point (deploy/container/manta-entrypoint.sh) runs in
// the test bed as it runs in the Kubernetes pods of deploy/kubernetes/: configured by
// the same environment variables, with the token in a file as a Secret volume gives
// it (root's, readable by the group: Manta refuses such a file, so the entry point
// makes a private copy), probed with the same `manta health-check` commands, and
// stopped by SIGTERM as a pod is.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>

#include "src/common/security.h"
#include "tests/multihost/multihost_cluster.h"

namespace manta::testing {
namespace {

std::string Entrypoint() { return std::string(MANTA_SOURCE_DIR) + "/deploy/container/manta-entrypoint.sh"; }

// As the kubelet writes a Secret: the file readable by the pod's group, not private.
void WriteSecret(TestBed& bed, int host, const std::string& token) {
  CommandResult r = bed.Exec(host, {"sh", "-c", "mkdir -p /tmp/secret && cat > /tmp/secret/token && chmod 0440 /tmp/secret/token"},
                             {}, 10000, token);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// The pod's environment (head.yaml / worker.yaml) for a node at `ip`.
TestBed::Env PodEnv(const std::string& role, const std::string& ip, const std::string& head) {
  TestBed::Env env = {{"MANTA_ROLE", role},
                      {"MANTA_NODE_IP", ip},
                      {"MANTA_NODE_NAME", role + "-pod"},
                      {"MANTA_NUM_CPUS", "2"},
                      {"MANTA_OBJECT_STORE_BYTES", std::to_string(256 << 20)},
                      {"MANTA_TOKEN_FILE", "/tmp/secret/token"},
                      {"MANTA_CLUSTER_TOKEN_FILE", "/tmp/manta-token/token"},
                      {"MANTA_BIN", MantaCli()}};
  if (role == "head") env["MANTA_GCS_PORT"] = "6379";
  if (role == "worker") env["MANTA_HEAD_ADDRESS"] = head + ":6379";
  return env;
}

bool Healthy(TestBed& bed, int host, const std::vector<std::string>& probe) {
  std::vector<std::string> argv = {MantaCli()};
  argv.insert(argv.end(), probe.begin(), probe.end());
  return bed.Exec(host, argv, {{"MANTA_CLUSTER_TOKEN_FILE", "/tmp/manta-token/token"}}, 10000).exit_code == 0;
}

TEST(DeployTest, TheImagesEntryPointRunsAHeadAndAWorkerAsInPods) {
  auto bed = TestBed::Up(2);
  ASSERT_TRUE(bed.ok()) << bed.status();
  TestBed& b = **bed;
  const std::string token = NewClusterToken();
  for (int h : {0, 1}) ASSERT_NO_FATAL_FAILURE(WriteSecret(b, h, token));

  auto head = b.Spawn(0, {Entrypoint()}, PodEnv("head", b.Ip(0), ""));
  ASSERT_TRUE(head.ok());
  // head.yaml's readiness probe.
  ASSERT_TRUE(WaitFor([&] { return Healthy(b, 0, {"health-check", "--address", "127.0.0.1:6379"}); }, 60000))
      << b.OutputOf(*head);
  auto worker = b.Spawn(1, {Entrypoint()}, PodEnv("worker", b.Ip(1), b.Ip(0)));
  ASSERT_TRUE(worker.ok());
  // worker.yaml's probes.
  ASSERT_TRUE(WaitFor([&] { return Healthy(b, 1, {"health-check", "--node"}); }, 60000)) << b.OutputOf(*worker);
  EXPECT_TRUE(Healthy(b, 0, {"health-check", "--node"}));
  // The copy the entry point made is private; the Secret's file was not.
  CommandResult mode = b.Exec(1, {"stat", "-c", "%a", "/tmp/manta-token/token"});
  EXPECT_EQ(mode.output, "600\n");

  // A driver in the worker pod (kubectl exec), as deploy/kubernetes/README.md says.
  CommandResult driver = b.Exec(1, {MultiHostDriver(), "spread", "8"},
                                {{"RAY_ADDRESS", b.Ip(0) + ":6379"}, {"MANTA_CLUSTER_TOKEN_FILE", "/tmp/manta-token/token"}},
                                120000);
  ASSERT_EQ(driver.exit_code, 0) << driver.output;
  EXPECT_NE(driver.output.find("RESULT"), std::string::npos) << driver.output;

  // Pod termination: SIGTERM to the entry point's process (now `manta start --block`).
  CommandResult term = b.Exec(1, {"pkill", "-TERM", "-f", "manta start --block"});
  EXPECT_EQ(term.exit_code, 0) << term.output;
  CommandResult stopped = b.Wait(*worker, 30000);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_FALSE(Healthy(b, 1, {"health-check", "--node", "--timeout-ms", "1000"}));
  // The head saw the node leave.
  EXPECT_TRUE(WaitFor(
      [&] {
        CommandResult status = b.Exec(0, {MantaCli(), "status", "--json", "--address", b.Ip(0) + ":6379"},
                                      {{"MANTA_CLUSTER_TOKEN_FILE", "/tmp/manta-token/token"}});
        return status.output.find("\"DEAD\"") != std::string::npos;
      },
      20000));
  ASSERT_EQ(b.Exec(0, {"pkill", "-TERM", "-f", "manta start --block"}).exit_code, 0);
  EXPECT_EQ(b.Wait(*head, 30000).exit_code, 0);
}

TEST(DeployTest, TheEntryPointRefusesAnIncompletePodDescription) {
  auto bed = TestBed::Up(1);
  ASSERT_TRUE(bed.ok()) << bed.status();
  TestBed::Env env = PodEnv("worker", (*bed)->Ip(0), "");
  env.erase("MANTA_HEAD_ADDRESS");
  CommandResult r = (*bed)->Exec(0, {Entrypoint()}, env, 10000);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("MANTA_HEAD_ADDRESS"), std::string::npos) << r.output;
  env = PodEnv("gateway", (*bed)->Ip(0), "");
  r = (*bed)->Exec(0, {Entrypoint()}, env, 10000);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("MANTA_ROLE"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace manta::testing
