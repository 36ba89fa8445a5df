// Security across hosts: a host that joins without the cluster's token (or with
// another cluster's) is refused, and the head's GCS log names it; a cluster with
// TLS across hosts works with certificates whose subjectAltName is each host's IP.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>

#include "src/common/process.h"
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

// What `curl <args> <url>` on `host` got: the HTTP status ("000" when there was
// none, e.g. a refused handshake) and the body, with curl's own errors.
struct CurlResult {
  std::string code;
  std::string body;
};
CurlResult Curl(TestBed& bed, int host, const std::string& url, const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(url);
  CommandResult r = bed.Exec(host, argv, {}, 20000);
  const size_t last = r.output.rfind('\n');
  if (last == std::string::npos) return {"", r.output};
  return {r.output.substr(last + 1), r.output.substr(0, last)};
}

// Whether Prometheus on `host` (its API on 127.0.0.1:9090 there) has scraped every
// one of `targets` successfully, per its `up` series.
bool PrometheusSeesEveryTargetUp(TestBed& bed, int host, size_t targets) {
  CurlResult r = Curl(bed, host, "http://127.0.0.1:9090/api/v1/query?query=sum(up)%20and%20count(up)%3D%3D" +
                                     std::to_string(targets));
  nlohmann::json answer = nlohmann::json::parse(r.body, nullptr, false);
  if (answer.is_discarded() || answer["data"]["result"].empty()) return false;
  return answer["data"]["result"][0]["value"][1] == std::to_string(targets);
}

// Prometheus endpoints and the dashboard across hosts: plain HTTP from another host
// is refused (the cluster runs TLS), HTTPS needs the token or a certificate of the
// cluster's CA; Debian's Prometheus on another host scrapes every daemon with the
// README's configuration (the token as a credentials file, the cluster's CA); the
// dashboard's own scraper reaches the other host's raylet over HTTPS.
TEST(MultiHostSecurityTest, MetricsAndTheDashboardAcrossHostsNeedHttpsAndTheTokenOrACertificate) {
  MultiHostOptions options;
  options.extra_start_args = {"--dashboard-host", "0.0.0.0"};
  auto cluster = TwoOfThree(options);
  ASSERT_NE(cluster, nullptr);
  TestBed& bed = cluster->bed();
  nlohmann::json status = cluster->Status(0);
  ASSERT_EQ(status["nodes"].size(), 2u) << status.dump();
  const std::string head = bed.Ip(0);
  const std::string gcs_metrics = head + ":" + std::to_string(status["gcs_metrics_export_port"].get<int>());
  std::vector<std::string> targets = {gcs_metrics};
  for (const auto& node : status["nodes"]) {
    const std::string address = node["address"];
    targets.push_back(address.substr(0, address.rfind(':')) + ":" + std::to_string(node["metrics_export_port"].get<int>()));
  }
  // Host 2 (no member) gets the cluster's CA certificate, the token and a wrong one.
  const std::string ca = bed.Exec(0, {"sh", "-c", "cat /tmp/manta-*/sessions/*/tls/ca.crt"}).output;
  ASSERT_NE(ca.find("BEGIN CERTIFICATE"), std::string::npos) << ca;
  for (const auto& [file, content] : std::vector<std::pair<std::string, std::string>>{
           {"ca.crt", ca},
           {"token", cluster->token()},
           {"auth", "Authorization: Bearer " + cluster->token()},
           {"wrong", "Authorization: Bearer " + std::string(cluster->token().size(), '0')}}) {
    ASSERT_EQ(bed.Exec(2, {"sh", "-c", "umask 077 && cat > /tmp/" + file}, {}, 10000, content).exit_code, 0);
  }
  const std::vector<std::string> https = {"--cacert", "/tmp/ca.crt"};
  auto with = [&https](const std::string& header_file) {
    std::vector<std::string> args = https;
    args.insert(args.end(), {"-H", "@/tmp/" + header_file});
    return args;
  };
  for (const std::string& target : targets) {
    SCOPED_TRACE(target);
    EXPECT_EQ(Curl(bed, 2, "http://" + target + "/metrics").code, "403");
    EXPECT_EQ(Curl(bed, 2, "https://" + target + "/metrics", https).code, "401");
    EXPECT_EQ(Curl(bed, 2, "https://" + target + "/metrics", with("wrong")).code, "401");
    CurlResult scraped = Curl(bed, 2, "https://" + target + "/metrics", with("auth"));
    EXPECT_EQ(scraped.code, "200") << scraped.body;
    EXPECT_NE(scraped.body.find("# TYPE "), std::string::npos);
  }
  // Host 1 is a member: its node certificate (from enrollment) opens the endpoints.
  CommandResult member = bed.Exec(
      1, {"sh", "-c",
          "cd /tmp/manta-*/sessions/*/tls && curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --cacert ca.crt "
          "--cert node.crt --key node.key https://" + gcs_metrics + "/metrics"});
  EXPECT_EQ(member.output, "200") << member.output;

  // Prometheus on host 2, configured as the README says.
  std::string config = "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: manta\n    scheme: https\n"
                       "    authorization:\n      credentials_file: /tmp/token\n    tls_config:\n"
                       "      ca_file: /tmp/ca.crt\n    static_configs:\n      - targets: [";
  for (size_t i = 0; i < targets.size(); ++i) config += (i ? ", '" : "'") + targets[i] + "'";
  config += "]\n";
  ASSERT_EQ(bed.Exec(2, {"sh", "-c", "cat > /tmp/prometheus.yml"}, {}, 10000, config).exit_code, 0);
  auto prometheus = bed.Spawn(2, {FindExecutable("prometheus"), "--config.file=/tmp/prometheus.yml",
                                  "--storage.tsdb.path=/tmp/prometheus", "--web.listen-address=127.0.0.1:9090"});
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  EXPECT_TRUE(WaitFor([&] { return PrometheusSeesEveryTargetUp(bed, 2, targets.size()); }, 60000))
      << Curl(bed, 2, "http://127.0.0.1:9090/api/v1/targets").body << bed.OutputOf(*prometheus);

  // The dashboard: HTTPS only, and the token (as a bearer or through the login's cookie).
  const std::string dashboard = "https://" + head + ":8265";
  EXPECT_EQ(Curl(bed, 2, "http://" + head + ":8265/api/summary?resource=tasks").code, "403");
  EXPECT_EQ(Curl(bed, 2, dashboard + "/api/summary?resource=tasks", https).code, "401");
  EXPECT_EQ(Curl(bed, 2, dashboard + "/api/summary?resource=tasks", with("auth")).code, "200");
  std::vector<std::string> login = https;
  login.insert(login.end(), {"-c", "/tmp/cookies", "-H", "Content-Type: application/json", "--data-binary",
                             "@/tmp/login.json"});
  ASSERT_EQ(bed.Exec(2, {"sh", "-c", "umask 077 && cat > /tmp/login.json"}, {}, 10000,
                     nlohmann::json{{"token", cluster->token()}}.dump())
                .exit_code,
            0);
  EXPECT_EQ(Curl(bed, 2, dashboard + "/api/login", login).code, "200");
  std::vector<std::string> cookie = https;
  cookie.insert(cookie.end(), {"-b", "/tmp/cookies"});
  // Its scraper reached host 1's raylet over HTTPS.
  EXPECT_TRUE(WaitFor(
      [&] {
        CurlResult m = Curl(bed, 2, dashboard + "/api/metrics", cookie);
        return m.code == "200" && m.body.find(bed.Ip(1)) != std::string::npos;
      },
      30000))
      << Curl(bed, 2, dashboard + "/api/metrics", cookie).body.substr(0, 2000);
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
