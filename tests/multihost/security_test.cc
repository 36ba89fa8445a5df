// Security across hosts: a host that joins without the cluster's token (or with
// another cluster's) is refused, and the head's GCS log names it; a cluster with
// TLS across hosts works with certificates whose subjectAltName is each host's IP.
#include <gtest/gtest.h>

#include <regex>

#include "src/common/security.h"
#include "src/common/util.h"
#include "tests/multihost/multihost_cluster.h"

namespace manta::testing {
namespace {

// A cluster on hosts 0 and 1 of a three-host bed: host 2 is the stranger.
std::unique_ptr<MultiHostCluster> TwoOfThree(const MultiHostOptions& base) {
  auto bed = TestBed::Up(3);
  EXPECT_TRUE(bed.ok()) << bed.status();
  if (!bed.ok()) return nullptr;
  MultiHostOptions options = base;
  options.num_hosts = 2;
  auto cluster = MultiHostCluster::StartOn(std::move(*bed), options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? std::move(*cluster) : nullptr;
}

// `manta start --address <gcs>` on host 2 with `token_file` (written there with
// `token` first, when given).
CommandResult JoinFromHost2(MultiHostCluster& cluster, const std::string& token) {
  TestBed& bed = cluster.bed();
  std::vector<std::string> args = {MantaCli(), "start", "--address", cluster.gcs_address(), "--bind-address",
                                   bed.Ip(2), "--object-store-memory", std::to_string(256 << 20)};
  if (!token.empty()) {
    EXPECT_EQ(bed.Exec(2, {"sh", "-c", "umask 077 && cat > /tmp/token"}, {}, 10000, token).exit_code, 0);
    args.insert(args.end(), {"--token-file", "/tmp/token"});
  }
  return bed.Exec(2, args, {}, 60000);
}

// The head's daemon logs (GCS and raylet), as one text.
std::string HeadLogs(MultiHostCluster& cluster) {
  return cluster.bed().Exec(0, {"sh", "-c", "cat /tmp/manta-*/sessions/*/logs/* 2>/dev/null"}).output;
}

TEST(MultiHostSecurityTest, AHostWithoutTheTokenOrWithAnotherClustersIsRefusedAndNamed) {
  auto cluster = TwoOfThree({});
  ASSERT_NE(cluster, nullptr);

  CommandResult none = JoinFromHost2(*cluster, "");
  EXPECT_NE(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("no cluster token"), std::string::npos) << none.output;

  // A token of the right form, but not this cluster's.
  CommandResult wrong = JoinFromHost2(*cluster, std::string(64, 'a') + "\n");
  EXPECT_NE(wrong.exit_code, 0) << wrong.output;
  EXPECT_NE(wrong.output.find("token"), std::string::npos) << wrong.output;

  // The cluster did not grow, and its log says who knocked.
  nlohmann::json status = cluster->Status(0);
  EXPECT_EQ(status["nodes"].size(), 2u) << status.dump();
  std::string logs = HeadLogs(*cluster);
  EXPECT_TRUE(std::regex_search(logs, std::regex("refused \\S+ from [^\\n]*" + cluster->bed().Ip(2))))
      << "no log line names the refused host " << cluster->bed().Ip(2);
}

// A CA and, for each host, a certificate for its own address (server and client).
class HostCertificates {
 public:
  explicit HostCertificates(const std::vector<std::string>& ips) {
    std::string script = "set -e; cd '" + dir_.path() +
                         "'; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
                         "ca.key -out ca.crt -days 2 -subj /CN=manta-multihost-ca 2>/dev/null; ";
    for (size_t i = 0; i < ips.size(); ++i) {
      std::string h = "host" + std::to_string(i);
      script += "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + h + ".key -out " +
                h + ".csr -subj /CN=" + h + " 2>/dev/null; printf 'subjectAltName=IP:" + ips[i] +
                ",IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > " + h +
                ".cnf; openssl x509 -req -in " + h + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -out " + h +
                ".crt -days 2 -extfile " + h + ".cnf 2>/dev/null; ";
    }
    CommandResult r = RunCommand({"/bin/sh", "-c", script}, {}, 60000);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  std::string Read(const std::string& name) const {
    auto text = ReadFile(dir_.path() + "/" + name);
    return text.ok() ? *text : "";
  }

 private:
  TempDir dir_;
};

TEST(MultiHostSecurityTest, ATlsClusterAcrossHostsWorksWithEachHostsOwnCertificate) {
  auto bed = TestBed::Up(3);
  ASSERT_TRUE(bed.ok()) << bed.status();
  std::vector<std::string> ips;
  for (int h = 0; h < 3; ++h) ips.push_back((*bed)->Ip(h));
  HostCertificates certs(ips);
  // Each host gets the CA and its own certificate and key, in the same place.
  for (int h = 0; h < 3; ++h) {
    std::string name = "host" + std::to_string(h);
    for (const auto& [file, content] : std::vector<std::pair<std::string, std::string>>{
             {"ca.crt", certs.Read("ca.crt")}, {"node.crt", certs.Read(name + ".crt")},
             {"node.key", certs.Read(name + ".key")}}) {
      CommandResult copied = (*bed)->Exec(
          h, {"sh", "-c", "umask 077 && mkdir -p /tmp/tls && cat > /tmp/tls/" + file}, {}, 10000, content);
      ASSERT_EQ(copied.exit_code, 0) << copied.output;
    }
  }
  MultiHostOptions options;
  options.num_hosts = 3;
  options.extra_start_args = {"--tls-cert", "/tmp/tls/node.crt", "--tls-key", "/tmp/tls/node.key", "--tls-ca",
                              "/tmp/tls/ca.crt"};
  options.env = {{"MANTA_TLS_CERT", "/tmp/tls/node.crt"},
                 {"MANTA_TLS_KEY", "/tmp/tls/node.key"},
                 {"MANTA_TLS_CA", "/tmp/tls/ca.crt"}};
  auto cluster = MultiHostCluster::StartOn(std::move(*bed), options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  nlohmann::json status = (*cluster)->Status(2);
  ASSERT_EQ(status["nodes"].size(), 3u) << status.dump();
  // A driver on a non-head host, over TLS, with tasks spilling across hosts.
  CommandResult r = (*cluster)->Driver(1, {"spread", "12"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json result = DriverResult(r.output);
  ASSERT_TRUE(result.is_object()) << r.output;
  EXPECT_GE(result["hosts"].size(), 2u) << result.dump();
  // Without the certificates, the CLI cannot talk to the cluster.
  CommandResult plain = (*cluster)->bed().Exec(
      2, {MantaCli(), "status", "--address", (*cluster)->gcs_address(), "--token-file", MultiHostCluster::kTokenPath});
  EXPECT_NE(plain.exit_code, 0) << plain.output;
}

// How many times `needle` appears in `haystack`.
size_t Occurrences(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

struct Captured {
  std::string packets;  // the pcap file
  std::string token;
  bool driver_right = false;
};

// A cluster on three hosts, started with `env` as a user on each machine would (the
// head on host 0; hosts 1 and 2 join with the token file), and a driver on host 2
// passing markers across hosts (multihost_driver markers), while every packet on
// the bridge is captured, from before the head starts to after the driver ends.
Captured CaptureRun(const TestBed::Env& env, const std::string& arg_marker, const std::string& obj_marker) {
  Captured out;
  auto bed = TestBed::Up(3);
  EXPECT_TRUE(bed.ok()) << bed.status();
  if (!bed.ok()) return out;
  TempDir dir;
  auto capture = (*bed)->StartCapture(dir.path() + "/bridge.pcap");
  EXPECT_TRUE(capture.ok()) << capture.status();
  if (!capture.ok()) return out;
  MultiHostOptions options;
  options.num_hosts = 3;
  options.env = env;
  auto cluster = MultiHostCluster::StartOn(std::move(*bed), options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return out;
  TestBed& hosts = (*cluster)->bed();
  CommandResult r = (*cluster)->Driver(2, {"markers", arg_marker, obj_marker});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json result = DriverResult(r.output);
  out.driver_right = result.is_object() && result.value("right", false);
  // The CLI as from a machine without a node: only the token file (it enrolls).
  TestBed::Env elsewhere = env;
  elsewhere["MANTA_TEMP_DIR"] = "/tmp/no-session-here";
  CommandResult status = hosts.Exec(1, {MantaCli(), "status", "--address", (*cluster)->gcs_address(), "--token-file",
                                        MultiHostCluster::kTokenPath},
                                    elsewhere);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_TRUE(hosts.StopCapture(*capture).ok());
  out.packets = ReadFile(dir.path() + "/bridge.pcap").value_or("");
  out.token = (*cluster)->token();
  while (!out.token.empty() && out.token.back() == '\n') out.token.pop_back();
  return out;
}

TEST(MultiHostSecurityTest, ACaptureOfTheNetworkShowsNoTokenNoTaskArgumentAndNoObject) {
  const std::string arg_marker = "argmark" + SecureRandomHex(8);
  const std::string obj_marker = "objmark" + SecureRandomHex(8);
  // As a user starts a cluster across machines: nothing about TLS asked or given.
  Captured tls = CaptureRun({}, arg_marker, obj_marker);
  ASSERT_TRUE(tls.driver_right);
  ASSERT_EQ(tls.token.size(), 64u);
  // Both objects crossed the bridge (4 MiB each), encrypted.
  EXPECT_GT(tls.packets.size(), size_t{8} << 20);
  EXPECT_EQ(Occurrences(tls.packets, tls.token), 0u) << "the token crossed the network readable";
  EXPECT_EQ(Occurrences(tls.packets, arg_marker), 0u) << "a task argument crossed the network readable";
  EXPECT_EQ(Occurrences(tls.packets, obj_marker), 0u) << "an object crossed the network readable";

  // The same run with TLS turned off shows all three: the capture sees what crosses.
  Captured plain = CaptureRun({{"MANTA_cluster_tls", "off"}}, arg_marker, obj_marker);
  ASSERT_TRUE(plain.driver_right);
  EXPECT_GT(Occurrences(plain.packets, plain.token), 0u);
  EXPECT_GT(Occurrences(plain.packets, arg_marker), 0u);
  EXPECT_GT(Occurrences(plain.packets, obj_marker), 1000u);
}

}  // namespace
}  // namespace manta::testing
