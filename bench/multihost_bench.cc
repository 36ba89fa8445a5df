// Host-to-host figures on the multi-host test bed (tests/multihost/testbed.sh): two
// hosts, each a network namespace joined through a bridge, a Manta node on each.
// Prints JSON. Must run as root (it makes namespaces).
//
//   raw_tcp:  the bridge's raw TCP rate, one connection, 4 MiB writes, read 128 KiB at
//             a time (as iperf3); raw_tcp_into_4mib: read into 4 MiB (cold memory)
//   transfer: an object of --bytes pulled by host 1's raylet from host 0's
//             (FetchObjects, as a reader does), timed at the raylet; best and median
//             of --rounds, contents checked; over the object data channel, or gRPC
//             streaming with --grpc (both without TLS: the paths against raw TCP)
//   --tls-cost: small tasks and actor calls from a driver on host 1 to host 0, and
//             the transfer, on a cluster with the default (TLS across hosts) beside
//             one with cluster_tls=off, --rounds times; the TLS / plaintext ratios
//
// The same binary also runs inside the hosts (the subcommands below), started by
// the orchestrating process through the test bed.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <vector>

#include "nlohmann/json.hpp"
#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/id.h"
#include "src/common/network.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/cluster_tls.h"
#include "src/common/flags.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/object_store/store_client.h"
#include "tests/multihost/multihost_cluster.h"

namespace manta::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void Die(const std::string& why) {
  std::cerr << "multihost_bench: " << why << std::endl;
  std::exit(1);
}

uint8_t Pattern(int64_t i, uint64_t seed) { return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 12)) & 0xff); }

// ---- inside a host

// Receives `bytes` on `port` from one connection into a buffer of `read_bytes`
// (small: it stays in the cache, as iperf3's 128 KiB does; large: cold memory, as an
// object's allocation is); prints the seconds it took.
int TcpSink(int port, int64_t bytes, int64_t read_bytes) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, 1) != 0) {
    Die("tcp-sink: cannot listen on port " + std::to_string(port));
  }
  std::cout << "LISTENING" << std::endl;
  int fd = accept(listener, nullptr, nullptr);
  std::vector<char> buf(static_cast<size_t>(read_bytes));
  int64_t got = 0;
  auto t0 = Clock::now();
  while (got < bytes) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) Die("tcp-sink: connection ended early");
    got += n;
  }
  std::cout << "SECONDS " << Since(t0) << std::endl;
  close(fd);
  close(listener);
  return 0;
}

int TcpSource(const std::string& ip, int port, int64_t bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("tcp-source: cannot connect");
  std::vector<char> buf(4 << 20, 'x');
  int64_t sent = 0;
  while (sent < bytes) {
    ssize_t n = write(fd, buf.data(), std::min<int64_t>(buf.size(), bytes - sent));
    if (n <= 0) Die("tcp-source: write failed");
    sent += n;
  }
  close(fd);
  return 0;
}

// This host's node (its raylet address and store socket), from the GCS.
rpc::NodeInfo LocalNode(const std::string& gcs) {
  std::string session;
  auto token = FindClusterToken(gcs, "", TempRoot(), &session);
  if (!token.ok()) Die(std::string(token.status().message()));
  rpc::Credentials credentials;
  credentials.token = *token;
  // This host's node's certificate when the cluster runs TLS.
  auto tls = AddMemberTls(gcs, session, ClusterTlsMode::kAuto, {}, 5000, &credentials);
  if (!tls.ok()) Die(std::string(tls.message()));
  rpc::SetProcessCredentials(credentials);
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs, 64 << 20));
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  rpc::GetAllNodeInfoReply reply;
  if (!stub->GetAllNodeInfo(&ctx, rpc::GetAllNodeInfoRequest(), &reply).ok()) Die("cannot read the node table");
  for (const rpc::NodeInfo& node : reply.node_info_list()) {
    if (node.state() == rpc::NodeInfo::ALIVE && node.node_manager_address() != "127.0.0.1" &&
        IsLocalAddress(node.node_manager_address())) {
      return node;
    }
  }
  Die("no node on this host");
}

std::unique_ptr<object_store::ObjectStoreClient> Store(const rpc::NodeInfo& node) {
  auto store = object_store::ObjectStoreClient::Connect(node.object_store_socket());
  if (!store.ok()) Die(std::string(store.status().message()));
  return std::move(*store);
}

// Makes a pinned object of `bytes` (id = hex) in this host's store.
int PutObject(const std::string& gcs, const std::string& hex, int64_t bytes) {
  auto id = ObjectID::FromHex(hex);
  if (!id.ok()) Die("bad object id");
  auto store = Store(LocalNode(gcs));
  auto buf = store->Create(*id, bytes, 0, /*pin_on_seal=*/true);
  if (!buf.ok()) Die("Create: " + std::string(buf.status().message()));
  for (int64_t i = 0; i < bytes; ++i) (*buf)[i] = Pattern(i, 1);
  if (!store->Seal(*id, true, true).ok()) Die("Seal failed");
  std::cout << "PUT" << std::endl;
  return 0;
}

// Deletes the object from this host's store (the source copy, after a round).
int DeleteObject(const std::string& gcs, const std::string& hex) {
  auto id = ObjectID::FromHex(hex);
  if (!id.ok()) Die("bad object id");
  auto store = Store(LocalNode(gcs));
  if (!store->Delete({*id}).ok()) Die("Delete failed");
  return 0;
}

// Has this host's raylet pull the object from `from` ("ip:port"), timed.
int FetchObject(const std::string& gcs, const std::string& hex, int64_t bytes, const std::string& from) {
  auto id = ObjectID::FromHex(hex);
  if (!id.ok()) Die("bad object id");
  rpc::NodeInfo node = LocalNode(gcs);
  auto store = Store(node);
  auto raylet = rpc::NodeManagerService::NewStub(
      rpc::MakeChannel(node.node_manager_address() + ":" + std::to_string(node.node_manager_port()), 64 << 20));
  rpc::FetchObjectsRequest request;
  request.add_object_ids(id->Binary());
  request.add_locations(from);
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  rpc::FetchObjectsReply reply;
  auto t0 = Clock::now();
  grpc::Status s = raylet->FetchObjects(&ctx, request, &reply);
  double seconds = Since(t0);
  if (!s.ok()) Die("FetchObjects: " + s.error_message());
  if (!reply.failures().empty()) Die("FetchObjects: " + reply.failures(0).message());
  auto got = store->Get({*id}, 1000);
  bool intact = got.ok() && (*got)[0] && (*got)[0]->data_size == bytes;
  for (int64_t i = 0; intact && i < bytes; i += 4093) intact = (*got)[0]->data[i] == Pattern(i, 1);
  (void)store->Release(*id);
  (void)store->Delete({*id});
  std::cout << "FETCHED " << seconds << " " << (intact ? "intact" : "corrupt") << std::endl;
  return 0;
}

// ---- the orchestrator

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Line(const std::string& output, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(key + " ([^\\n]*)"))) return "";
  return m[1];
}

nlohmann::json RawTcp(testing::MultiHostCluster& cluster, int64_t bytes, int rounds, int64_t read_bytes) {
  std::vector<double> gbps;
  for (int r = 0; r < rounds; ++r) {
    const int port = 47000 + r;
    auto sink = cluster.bed().Spawn(
        1, {SelfExecutablePath(), "tcp-sink", std::to_string(port), std::to_string(bytes), std::to_string(read_bytes)});
    if (!sink.ok()) Die("tcp-sink did not start");
    if (!testing::WaitFor([&] { return cluster.bed().OutputOf(*sink).find("LISTENING") != std::string::npos; },
                          10000)) {
      Die("tcp-sink did not listen: " + cluster.bed().OutputOf(*sink));
    }
    testing::CommandResult sent = cluster.bed().Exec(
        0, {SelfExecutablePath(), "tcp-source", cluster.bed().Ip(1), std::to_string(port), std::to_string(bytes)});
    testing::CommandResult got = cluster.bed().Wait(*sink, 60000);
    if (sent.exit_code != 0 || got.exit_code != 0) Die("raw TCP round failed: " + sent.output + got.output);
    gbps.push_back(static_cast<double>(bytes) / std::stod(Line(got.output, "SECONDS")) / 1e9);
  }
  return {{"bytes", bytes},       {"read_bytes", read_bytes},
          {"gbps", *std::max_element(gbps.begin(), gbps.end())}, {"median_gbps", Median(gbps)},
          {"rounds_gbps", gbps}};
}

nlohmann::json Transfer(testing::MultiHostCluster& cluster, int64_t bytes, int rounds) {
  nlohmann::json status = cluster.Status(0);
  std::string from;
  for (const auto& node : status["nodes"]) {
    std::string address = node["address"];
    if (address.rfind(cluster.bed().Ip(0) + ":", 0) == 0) from = address;
  }
  if (from.empty()) Die("no node on host 0: " + status.dump());
  std::vector<double> gbps;
  bool intact = true;
  for (int r = 0; r < rounds; ++r) {
    const std::string id = ObjectID::FromRandom().Hex();
    testing::CommandResult put = cluster.bed().Exec(
        0, {SelfExecutablePath(), "put-object", cluster.gcs_address(), id, std::to_string(bytes)}, {}, 120000);
    if (put.exit_code != 0) Die("put-object: " + put.output);
    testing::CommandResult fetched = cluster.bed().Exec(
        1, {SelfExecutablePath(), "fetch-object", cluster.gcs_address(), id, std::to_string(bytes), from}, {}, 300000);
    if (fetched.exit_code != 0) Die("fetch-object: " + fetched.output);
    // The source copy goes too: left pinned, the sender's store would fill and spill.
    testing::CommandResult deleted =
        cluster.bed().Exec(0, {SelfExecutablePath(), "delete-object", cluster.gcs_address(), id}, {}, 60000);
    if (deleted.exit_code != 0) Die("delete-object: " + deleted.output);
    std::string result = Line(fetched.output, "FETCHED");
    gbps.push_back(static_cast<double>(bytes) / std::stod(result) / 1e9);
    intact &= result.find("intact") != std::string::npos;
  }
  return {{"bytes", bytes},         {"gbps", *std::max_element(gbps.begin(), gbps.end())},
          {"median_gbps", Median(gbps)}, {"rounds_gbps", gbps},
          {"contents_intact", intact}};
}

int Orchestrate(int64_t bytes, int rounds, int mtu, bool grpc) {
  auto bed = testing::TestBed::Up(2, mtu);
  if (!bed.ok()) Die(std::string(bed.status().message()));
  testing::MultiHostOptions options;
  options.num_hosts = 2;
  options.object_store_bytes = bytes + (int64_t{512} << 20);
  if (grpc) options.env["MANTA_object_data_channel"] = "false";
  // The paths against raw TCP, unencrypted (--tls-cost measures what TLS adds).
  options.env["MANTA_cluster_tls"] = "off";
  auto cluster = testing::MultiHostCluster::StartOn(std::move(*bed), options);
  if (!cluster.ok()) Die(std::string(cluster.status().message()));
  nlohmann::json out;
  out["mtu"] = mtu;
  out["path"] = grpc ? "grpc" : "object data channel";
  // Warm up both paths once (connections, pages of the stores), then measure.
  RawTcp(**cluster, int64_t{256} << 20, 1, 128 << 10);
  Transfer(**cluster, std::min<int64_t>(bytes, int64_t{256} << 20), 1);
  // One after the other on the same cluster and machine.
  out["raw_tcp"] = RawTcp(**cluster, bytes, rounds, 128 << 10);
  out["raw_tcp_into_4mib"] = RawTcp(**cluster, bytes, rounds, 4 << 20);
  out["transfer"] = Transfer(**cluster, bytes, rounds);
  out["transfer"]["vs_raw_tcp"] =
      out["transfer"]["median_gbps"].get<double>() / out["raw_tcp"]["median_gbps"].get<double>();
  std::cout << out.dump(2) << std::endl;
  return out["transfer"]["contents_intact"].get<bool>() ? 0 : 1;
}

// What TLS costs between hosts: small tasks and actor calls from a driver on host 1
// to host 0, and host-to-host transfer, on a cluster with the default (TLS across
// hosts) beside one with cluster_tls=off, one after the other on the same machine,
// `rounds` times (the transfer: the median of three after one to warm up); medians,
// and the TLS / plaintext ratios.
int TlsCost(int64_t bytes, int rounds, int mtu) {
  std::map<std::string, std::map<std::string, std::vector<double>>> runs;
  for (int r = 0; r < rounds; ++r) {
    for (const char* mode : {"tls", "plaintext"}) {
      auto bed = testing::TestBed::Up(2, mtu);
      if (!bed.ok()) Die(std::string(bed.status().message()));
      testing::MultiHostOptions options;
      options.num_hosts = 2;
      options.object_store_bytes = bytes + (int64_t{512} << 20);
      if (std::string(mode) == "plaintext") options.env["MANTA_cluster_tls"] = "off";
      auto cluster = testing::MultiHostCluster::StartOn(std::move(*bed), options);
      if (!cluster.ok()) Die(std::string(cluster.status().message()));
      Transfer(**cluster, bytes, 1);  // warm up: the stores' pages, the connections
      runs[mode]["transfer_gbps"].push_back(Transfer(**cluster, bytes, 3)["median_gbps"].get<double>());
      testing::CommandResult rates = (*cluster)->Driver(1, {"rates", "0", "2"}, 300000);
      nlohmann::json result = testing::DriverResult(rates.output);
      if (rates.exit_code != 0 || !result.is_object()) Die("rates: " + rates.output);
      for (const char* key : {"tasks_per_s", "task_round_trips_per_s", "actor_calls_per_s", "actor_round_trips_per_s"}) {
        runs[mode][key].push_back(result[key].get<double>());
      }
    }
  }
  nlohmann::json out = {{"path", "TLS default beside cluster_tls=off"}, {"mtu", mtu}, {"bytes", bytes},
                        {"rounds", rounds}};
  for (const auto& [mode, metrics] : runs) {
    for (const auto& [key, values] : metrics) out[mode][key] = {{"median", Median(values)}, {"rounds", values}};
  }
  for (const auto& [key, values] : runs["tls"]) {
    out["tls_over_plaintext"][key] = Median(values) / Median(runs["plaintext"][key]);
  }
  std::cout << out.dump(2) << std::endl;
  return 0;
}

}  // namespace
}  // namespace manta::bench

int main(int argc, char** argv) {
  using namespace manta::bench;
  manta::FlagParser flags("multihost_bench: host-to-host transfer against the raw TCP rate of the test bed");
  int64_t bytes = int64_t{1} << 30;
  int rounds = 5;
  int mtu = 9000;
  flags.Add("--bytes", &bytes, "object size").Range(1, int64_t{1} << 40);
  flags.Add("--rounds", &rounds, "rounds of each measurement").Range(1, 1000);
  flags.Add("--mtu", &mtu, "MTU of the test bed's links").Range(576, 65535);
  bool grpc = false;
  flags.AddFlag("--grpc", &grpc, "move objects over gRPC streaming (as with TLS), not the object data channel");
  bool tls_cost = false;
  flags.AddFlag("--tls-cost", &tls_cost,
                "tasks, actor calls and transfer between hosts with the TLS default beside cluster_tls=off");
  std::string gcs, hex, ip, from;
  int port = 0;
  int64_t n = 0;
  manta::FlagParser& sink = flags.AddSubcommand("tcp-sink", "receive bytes over raw TCP");
  sink.Add("port", &port, "port to listen on").Required().Range(0, 65535);
  sink.Add("bytes", &n, "bytes to receive").Required().Range(0, int64_t{1} << 40);
  int64_t read_bytes = 128 << 10;
  sink.Add("read_bytes", &read_bytes, "bytes per read").Range(1, 1 << 30);
  manta::FlagParser& source = flags.AddSubcommand("tcp-source", "send bytes over raw TCP");
  source.Add("ip", &ip, "address to send to").Required();
  source.Add("port", &port, "its port").Required().Range(1, 65535);
  source.Add("bytes", &n, "bytes to send").Required().Range(0, int64_t{1} << 40);
  manta::FlagParser& put = flags.AddSubcommand("put-object", "put an object into this host's store");
  put.Add("gcs", &gcs, "the GCS's address").Required();
  put.Add("id", &hex, "the object id (hex)").Required();
  put.Add("bytes", &n, "its size").Required().Range(0, int64_t{1} << 40);
  manta::FlagParser& del = flags.AddSubcommand("delete-object", "delete an object from this host's store");
  del.Add("gcs", &gcs, "the GCS's address").Required();
  del.Add("id", &hex, "the object id (hex)").Required();
  manta::FlagParser& fetch = flags.AddSubcommand("fetch-object", "fetch an object from another host");
  fetch.Add("gcs", &gcs, "the GCS's address").Required();
  fetch.Add("id", &hex, "the object id (hex)").Required();
  fetch.Add("bytes", &n, "its size").Required().Range(0, int64_t{1} << 40);
  fetch.Add("from", &from, "the node that holds it").Required();
  if (std::optional<int> exit_code = flags.Parse(argc, argv)) return *exit_code;
  if (sink.Given()) return TcpSink(port, n, read_bytes);
  if (source.Given()) return TcpSource(ip, port, n);
  if (put.Given()) return PutObject(gcs, hex, n);
  if (fetch.Given()) return FetchObject(gcs, hex, n, from);
  if (del.Given()) return DeleteObject(gcs, hex);
  if (tls_cost) return TlsCost(bytes, rounds, mtu);
  return Orchestrate(bytes, rounds, mtu, grpc);
}
