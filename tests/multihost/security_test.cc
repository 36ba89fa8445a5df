// Security across hosts: a host that joins without the cluster's token (or with
// another cluster's) is refused, and the head's GCS log names it; a cluster with
// TLS across hosts works with certificates whose subjectAltName is each host's IP.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
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
  // Bytes the GCS answered a replay of a captured enrollment's proof with (-1: not
  // replayed), and whether its log then named the replaying host.
  int replay_reply_bytes = -1;
  bool replay_logged = false;
};

// The payload bytes every TCP connection to `port` sent, in capture order, keyed by
// the connection's source (ip:port): IPv4 over Ethernet, as the bridge carries them.
std::map<std::string, std::string> PayloadsTo(const std::string& pcap, int port) {
  std::map<std::string, std::string> streams;
  auto u16 = [&](size_t at) { return (static_cast<unsigned>(static_cast<uint8_t>(pcap[at])) << 8) |
                                     static_cast<uint8_t>(pcap[at + 1]); };
  auto le32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(pcap[at + i])) << (8 * i);
    return v;
  };
  for (size_t at = 24; at + 16 <= pcap.size();) {
    const size_t length = le32(at + 8);
    const size_t frame = at + 16;
    at = frame + length;
    if (at > pcap.size() || length < 14 + 20 + 20 || u16(frame + 12) != 0x0800) continue;
    const size_t ip = frame + 14;
    const size_t ip_header = (static_cast<uint8_t>(pcap[ip]) & 0x0f) * 4;
    if (static_cast<uint8_t>(pcap[ip + 9]) != 6) continue;  // TCP
    const size_t tcp = ip + ip_header;
    const size_t tcp_header = (static_cast<uint8_t>(pcap[tcp + 12]) >> 4) * 4;
    const size_t end = ip + u16(ip + 2);
    if (static_cast<int>(u16(tcp + 2)) != port || tcp + tcp_header >= end || end > at) continue;
    char source[32];
    std::snprintf(source, sizeof(source), "%u.%u.%u.%u:%u", static_cast<uint8_t>(pcap[ip + 12]),
                  static_cast<uint8_t>(pcap[ip + 13]), static_cast<uint8_t>(pcap[ip + 14]),
                  static_cast<uint8_t>(pcap[ip + 15]), u16(tcp));
    streams[source].append(pcap, tcp + tcp_header, end - tcp - tcp_header);
  }
  return streams;
}

// Replays, from host 1, the hello and proof of an enrollment found in `pcap` to the
// GCS: the server's new nonce makes the old proof worthless. Fills the replay
// fields of `out`.
void ReplayAnEnrollment(MultiHostCluster& cluster, const std::string& pcap, Captured* out) {
  const auto hp = ParseHostPort(cluster.gcs_address());
  ASSERT_TRUE(hp.ok());
  std::string hello, proof;
  for (const auto& [source, bytes] : PayloadsTo(pcap, hp->port)) {
    if (bytes.rfind("MNTENRL1", 0) != 0 || bytes.size() < 42) continue;
    const size_t key = static_cast<uint8_t>(bytes[40]) | (static_cast<uint8_t>(bytes[41]) << 8);
    if (bytes.size() < 44 + key) continue;
    const size_t names = static_cast<uint8_t>(bytes[42 + key]) | (static_cast<uint8_t>(bytes[43 + key]) << 8);
    if (bytes.size() < 44 + key + names + 32) continue;
    hello = bytes.substr(0, 44 + key + names);
    proof = bytes.substr(hello.size(), 32);
    break;
  }
  ASSERT_FALSE(hello.empty()) << "no enrollment in the capture";
  TestBed& hosts = cluster.bed();
  ASSERT_EQ(hosts.Exec(1, {"sh", "-c", "cat > /tmp/hello"}, {}, 10000, hello).exit_code, 0);
  ASSERT_EQ(hosts.Exec(1, {"sh", "-c", "cat > /tmp/proof"}, {}, 10000, proof).exit_code, 0);
  CommandResult replay = hosts.Exec(
      1, {"bash", "-c", "exec 3<>/dev/tcp/" + hp->host + "/" + std::to_string(hp->port) +
                            " && cat /tmp/hello >&3 && head -c 64 <&3 >/dev/null && cat /tmp/proof >&3 && "
                            "timeout 5 cat <&3 | wc -c"});
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  out->replay_reply_bytes = std::stoi(replay.output);
  std::string logs = hosts.Exec(0, {"sh", "-c", "cat /tmp/manta-*/sessions/*/logs/*gcs* 2>/dev/null"}).output;
  out->replay_logged = logs.find("refused enrollment from " + hosts.Ip(1)) != std::string::npos;
}

// A cluster on three hosts, started with `env` as a user on each machine would (the
// head on host 0; hosts 1 and 2 join with the token file), and a driver on host 2
// passing markers across hosts (multihost_driver markers), while every packet on
// the bridge is captured, from before the head starts to after the driver ends.
Captured CaptureRun(const TestBed::Env& env, const std::string& arg_marker, const std::string& obj_marker,
                    bool replay) {
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
  if (replay) ReplayAnEnrollment(**cluster, out.packets, &out);
  return out;
}

TEST(MultiHostSecurityTest, ACaptureOfTheNetworkShowsNoTokenNoTaskArgumentAndNoObject) {
  const std::string arg_marker = "argmark" + SecureRandomHex(8);
  const std::string obj_marker = "objmark" + SecureRandomHex(8);
  // As a user starts a cluster across machines: nothing about TLS asked or given.
  Captured tls = CaptureRun({}, arg_marker, obj_marker, /*replay=*/true);
  ASSERT_TRUE(tls.driver_right);
  ASSERT_EQ(tls.token.size(), 64u);
  // Both objects crossed the bridge (4 MiB each), encrypted.
  EXPECT_GT(tls.packets.size(), size_t{8} << 20);
  EXPECT_EQ(Occurrences(tls.packets, tls.token), 0u) << "the token crossed the network readable";
  EXPECT_EQ(Occurrences(tls.packets, arg_marker), 0u) << "a task argument crossed the network readable";
  EXPECT_EQ(Occurrences(tls.packets, obj_marker), 0u) << "an object crossed the network readable";
  // A captured enrollment replayed to the GCS gets nothing (its proof was for another
  // nonce), and the GCS names the host that tried.
  EXPECT_EQ(tls.replay_reply_bytes, 0);
  EXPECT_TRUE(tls.replay_logged);

  // The same run with TLS turned off shows all three: the capture sees what crosses.
  Captured plain = CaptureRun({{"MANTA_cluster_tls", "off"}}, arg_marker, obj_marker, /*replay=*/false);
  ASSERT_TRUE(plain.driver_right);
  EXPECT_GT(Occurrences(plain.packets, plain.token), 0u);
  EXPECT_GT(Occurrences(plain.packets, arg_marker), 0u);
  EXPECT_GT(Occurrences(plain.packets, obj_marker), 1000u);
}

}  // namespace
}  // namespace manta::testing
