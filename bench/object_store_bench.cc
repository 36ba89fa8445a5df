// Object store benchmarks on a real local cluster (issue: objects). Prints JSON.
//
// Every figure is measured in the same run as its baseline (memcpy of the same size).
// Nodes: A and B with stores of --big-store-bytes (put/get/transfer), C with a small
// store of --spill-store-bytes (spilling 2x its capacity and reading it back).
#include <grpcpp/grpcpp.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "nlohmann/json.hpp"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/flags.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_client.h"
#include "src/object_store/store_client.h"

namespace manta::bench {
namespace {

using Clock = std::chrono::steady_clock;
using object_store::ObjectStoreClient;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::unique_ptr<ObjectStoreClient> ConnectTo(const rpc::NodeInfo& node) {
  auto c = ObjectStoreClient::Connect(node.object_store_socket());
  if (!c.ok()) Die(std::string(c.status().message()));
  return std::move(*c);
}

std::unique_ptr<rpc::NodeManagerService::Stub> RayletStub(const rpc::NodeInfo& node) {
  return rpc::NodeManagerService::NewStub(
      rpc::MakeChannel(node.node_manager_address() + ":" + std::to_string(node.node_manager_port()), 64 << 20));
}

ObjectID NewId() { return ObjectID::FromRandom(); }

// Fills `n` bytes with a pattern derived from `seed` (cheap, position-dependent).
void Fill(uint8_t* p, int64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i);
}

double MemcpyGbps(uint8_t* dst, const uint8_t* src, int64_t n) {
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst, src, n);
    auto t1 = Clock::now();
    best = std::max(best, n / Seconds(t0, t1) / 1e9);
  }
  return best;
}

nlohmann::json BenchBig(ObjectStoreClient& a, const uint8_t* src, int64_t n, double memcpy_gbps) {
  nlohmann::json out;
  std::vector<double> put_gbps;
  ObjectID kept;
  double create_ms = 0, copy_ms = 0, seal_ms = 0;
  for (int r = 0; r < 4; ++r) {
    ObjectID id = NewId();
    auto t0 = Clock::now();
    auto buf = a.Create(id, n);
    if (!buf.ok()) Die("Create 1 GiB: " + std::string(buf.status().message()));
    auto tc = Clock::now();
    std::memcpy(*buf, src, n);
    auto tm = Clock::now();
    if (auto s = a.Seal(id, true, /*wait=*/true); !s.ok()) Die(std::string(s.message()));
    auto t1 = Clock::now();
    put_gbps.push_back(n / Seconds(t0, t1) / 1e9);
    if (r == 3) {
      create_ms = Seconds(t0, tc) * 1e3;
      copy_ms = Seconds(tc, tm) * 1e3;
      seal_ms = Seconds(tm, t1) * 1e3;
    }
    if (r < 3) {
      (void)a.Delete({id});
    } else {
      kept = id;
    }
  }
  double best_put = *std::max_element(put_gbps.begin() + 1, put_gbps.end());
  out["put_bytes"] = n;
  out["put_first_gbps"] = put_gbps[0];
  out["put_gbps"] = best_put;
  out["put_vs_memcpy"] = best_put / memcpy_gbps;
  out["last_put_ms"] = {{"create", create_ms}, {"copy", copy_ms}, {"seal", seal_ms}};

  std::vector<double> get_us;
  for (int r = 0; r < 20; ++r) {
    auto t0 = Clock::now();
    auto got = a.Get({kept}, 0);
    auto t1 = Clock::now();
    if (!got.ok() || !(*got)[0]) Die("Get of the sealed 1 GiB object failed");
    get_us.push_back(Seconds(t0, t1) * 1e6);
    (void)a.Release(kept);
  }
  std::sort(get_us.begin(), get_us.end());
  out["get_us_p50"] = get_us[get_us.size() / 2];
  out["get_us_max"] = get_us.back();
  auto got = a.Get({kept}, 0);
  bool intact = got.ok() && (*got)[0] && std::memcmp((*got)[0]->data, src, n) == 0;
  (void)a.Release(kept);
  out["get_contents_intact"] = intact;
  (void)a.Delete({kept});
  return out;
}

nlohmann::json BenchSmall(ObjectStoreClient& a, double seconds) {
  nlohmann::json out;
  std::vector<uint8_t> payload(1024, 7);
  std::vector<ObjectID> ids;
  auto t0 = Clock::now();
  auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (int k = 0; k < 256; ++k) {
      ObjectID id = NewId();
      auto buf = a.Create(id, payload.size());
      if (!buf.ok()) Die("small Create: " + std::string(buf.status().message()));
      std::memcpy(*buf, payload.data(), payload.size());
      (void)a.Seal(id);
      ids.push_back(id);
    }
  }
  auto t1 = Clock::now();
  out["put_1kib_per_s"] = ids.size() / Seconds(t0, t1);

  int64_t gets = 0;
  t0 = Clock::now();
  end = t0 + std::chrono::duration<double>(seconds);
  size_t i = 0;
  while (Clock::now() < end) {
    for (int k = 0; k < 256; ++k) {
      const ObjectID& id = ids[i++ % ids.size()];
      auto got = a.Get({id}, 0);
      if (!got.ok() || !(*got)[0]) Die("small Get failed");
      (void)a.Release(id);
      ++gets;
    }
  }
  t1 = Clock::now();
  out["get_release_distinct_1kib_per_s"] = gets / Seconds(t0, t1);

  // Ray's single_client_get_calls: the same object, fetched and released repeatedly.
  gets = 0;
  const ObjectID& hot = ids.front();
  t0 = Clock::now();
  end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (int k = 0; k < 256; ++k) {
      auto got = a.Get({hot}, 0);
      if (!got.ok() || !(*got)[0]) Die("small Get failed");
      (void)a.Release(hot);
      ++gets;
    }
  }
  t1 = Clock::now();
  out["get_release_same_1kib_per_s"] = gets / Seconds(t0, t1);
  out["num_small_objects"] = ids.size();
  if (auto s = a.TakeAsyncError(); !s.ok()) Die("async error: " + std::string(s.message()));
  for (size_t k = 0; k < ids.size(); k += 1000) {
    std::vector<ObjectID> batch(ids.begin() + k, ids.begin() + std::min(ids.size(), k + 1000));
    (void)a.Delete(batch);
  }
  return out;
}

nlohmann::json BenchTransfer(ObjectStoreClient& a, ObjectStoreClient& b, const rpc::NodeInfo& node_a,
                             const rpc::NodeInfo& node_b, const uint8_t* src, int64_t n, int rounds) {
  nlohmann::json out;
  auto stub = RayletStub(node_b);
  std::vector<double> gbps;
  bool intact = true;

  for (int r = 0; r < rounds; ++r) {
    ObjectID id = NewId();
    auto buf = a.Create(id, n, 0, /*pin_on_seal=*/true);
    if (!buf.ok()) Die("Create for transfer: " + std::string(buf.status().message()));
    std::memcpy(*buf, src, n);
    (void)a.Seal(id, true, true);
    rpc::FetchObjectsRequest req;
    req.add_object_ids(id.Binary());
    req.add_locations(node_a.node_manager_address() + ":" + std::to_string(node_a.node_manager_port()));
    rpc::FetchObjectsReply reply;
    grpc::ClientContext ctx;
    rpc::AttachClusterToken(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    auto t0 = Clock::now();
    grpc::Status s = stub->FetchObjects(&ctx, req, &reply);
    auto t1 = Clock::now();
    if (!s.ok()) Die("FetchObjects: " + s.error_message());
    if (!reply.failures().empty()) Die("FetchObjects: " + reply.failures(0).message());
    gbps.push_back(n / Seconds(t0, t1) / 1e9);
    auto got = b.Get({id}, 1000);
    intact &= got.ok() && (*got)[0] && (*got)[0]->data_size == n && std::memcmp((*got)[0]->data, src, n) == 0;
    (void)b.Release(id);
    (void)b.Delete({id});
    (void)a.Delete({id});
  }
  out["bytes"] = n;
  out["gbps"] = *std::max_element(gbps.begin(), gbps.end());
  out["first_gbps"] = gbps[0];
  std::vector<double> sorted = gbps;
  std::sort(sorted.begin(), sorted.end());
  out["median_gbps"] = sorted[sorted.size() / 2];
  out["rounds_gbps"] = gbps;
  out["contents_intact"] = intact;
  return out;
}

// What the disk the store spills to does for `bytes` written in 16 MiB writes (not
// synced, as the spiller writes) and read back in 16 MiB reads: the `dd` baseline of
// BenchSpill, written next to the cluster's sessions.
nlohmann::json DiskBaseline(const std::string& dir, int64_t bytes) {
  const std::string path = dir + "/dd_baseline";
  const int64_t chunk = 16 << 20;
  std::vector<uint8_t> buf(chunk);
  Fill(buf.data(), chunk, 7);
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) Die("cannot create " + path);
  auto t0 = Clock::now();
  for (int64_t done = 0; done < bytes; done += chunk) {
    if (write(fd, buf.data(), chunk) != chunk) Die("writing " + path + " failed");
  }
  if (close(fd) != 0) Die("closing " + path + " failed");
  auto t1 = Clock::now();
  fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Die("cannot open " + path);
  int64_t got = 0;
  for (ssize_t n; (n = read(fd, buf.data(), chunk)) > 0;) got += n;
  auto t2 = Clock::now();
  close(fd);
  unlink(path.c_str());
  nlohmann::json out;
  out["write_gbps"] = bytes / Seconds(t0, t1) / 1e9;
  out["read_gbps"] = got / Seconds(t1, t2) / 1e9;
  return out;
}

nlohmann::json BenchSpill(ObjectStoreClient& c, const rpc::NodeInfo& node_c, int64_t store_bytes) {
  nlohmann::json out;
  const int64_t object_bytes = 16 << 20;
  int64_t count = 2 * store_bytes / object_bytes;
  std::vector<ObjectID> ids;
  auto t0 = Clock::now();
  for (int64_t i = 0; i < count; ++i) {
    ObjectID id = NewId();
    auto buf = c.Create(id, object_bytes, 0, /*pin_on_seal=*/true);
    if (!buf.ok()) Die("spill Create " + std::to_string(i) + ": " + std::string(buf.status().message()));
    Fill(*buf, object_bytes, i);
    (void)c.Seal(id);
    ids.push_back(id);
  }
  auto t1 = Clock::now();
  std::vector<uint8_t> expect(object_bytes);
  int64_t bad = 0;
  double read_s = 0;  // the Gets alone, not the checks of what they read
  for (int64_t i = 0; i < count; ++i) {
    auto get_start = Clock::now();
    auto got = c.Get({ids[i]}, 60000);
    read_s += Seconds(get_start, Clock::now());
    if (!got.ok() || !(*got)[0]) Die("spilled object " + std::to_string(i) + " could not be read back");
    Fill(expect.data(), object_bytes, i);
    if ((*got)[0]->data_size != object_bytes || std::memcmp((*got)[0]->data, expect.data(), object_bytes) != 0) ++bad;
    (void)c.Release(ids[i]);
  }
  auto t2 = Clock::now();
  auto stub = RayletStub(node_c);
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  rpc::GetNodeStatsReply stats;
  (void)stub->GetNodeStats(&ctx, rpc::GetNodeStatsRequest(), &stats);
  const auto& o = stats.usage().object_store();
  out["store_bytes"] = store_bytes;
  out["written_bytes"] = count * object_bytes;
  out["write_gbps"] = count * object_bytes / Seconds(t0, t1) / 1e9;
  out["read_back_gbps"] = count * object_bytes / read_s / 1e9;
  out["read_back_and_check_s"] = Seconds(t1, t2);
  out["spilled_bytes_total"] = o.spilled_bytes_total();
  out["restored_bytes_total"] = o.restored_bytes_total();
  out["corrupt_objects"] = bad;
  out["all_bytes_intact"] = bad == 0;
  (void)c.Delete(ids);
  // The same bytes through the same disk, in the same run.
  out["dd"] = DiskBaseline(std::filesystem::temp_directory_path().string(), count * object_bytes);
  out["write_vs_dd"] = out["write_gbps"].get<double>() / out["dd"]["write_gbps"].get<double>();
  // Of the read-back time, nearly all is restoring (objects still in memory cost
  // little): the restored bytes over it.
  out["restore_gbps"] = static_cast<double>(o.restored_bytes_total()) / read_s / 1e9;
  out["restore_vs_dd_read"] = out["restore_gbps"].get<double>() / out["dd"]["read_gbps"].get<double>();
  return out;
}

}  // namespace
}  // namespace manta::bench

namespace manta::bench {
int Run(int64_t big_bytes, int64_t big_store, int64_t spill_store, double small_seconds, int transfer_rounds);
}  // namespace manta::bench

int main(int argc, char** argv) {
  using namespace manta::bench;
  manta::FlagParser flags("object store benchmarks (JSON on stdout)");
  int64_t big_bytes = 1LL << 30;
  int64_t big_store = 3LL << 30;
  int64_t spill_store = 256LL << 20;
  double small_seconds = 2;
  int transfer_rounds = 5;
  flags.Add("--big-bytes", &big_bytes, "size of the big object").NonNegative();
  flags.Add("--big-store-bytes", &big_store, "store size of nodes A and B").NonNegative();
  flags.Add("--spill-store-bytes", &spill_store, "store size of node C").NonNegative();
  flags.Add("--small-seconds", &small_seconds, "duration of each small-object phase").NonNegative();
  flags.Add("--transfer-rounds", &transfer_rounds, "1 GiB transfers to time (the best is reported)").NonNegative();
  if (std::optional<int> exit_code = flags.Parse(argc, argv)) return *exit_code;

  // Small spill batches so a small store exercises several spill files.
  setenv("MANTA_object_spilling_min_bytes", std::to_string(32 << 20).c_str(), 1);
  try {
    return Run(big_bytes, big_store, spill_store, small_seconds, transfer_rounds);
  } catch (const std::exception& e) {
    std::cerr << "benchmark failed: " << e.what() << std::endl;
    return 1;
  }
}

namespace manta::bench {

int Run(int64_t big_bytes, int64_t big_store, int64_t spill_store, double small_seconds, int transfer_rounds) {
  BenchCluster cluster;
  cluster.StartHead({"--num-cpus", "1", "--object-store-memory", std::to_string(big_store)});
  cluster.StartNode({"--num-cpus", "1", "--object-store-memory", std::to_string(big_store)});
  cluster.StartNode({"--num-cpus", "1", "--object-store-memory", std::to_string(spill_store)});
  auto nodes = cluster.Nodes();
  if (nodes.size() != 3) Die("expected 3 nodes");
  // Measure warm stores: the first write to never-touched memory pays page
  // allocation and zeroing.
  cluster.WaitForPrefault();
  auto a = ConnectTo(nodes[0]);
  auto b = ConnectTo(nodes[1]);
  auto c = ConnectTo(nodes[2]);

  std::vector<uint8_t> src(big_bytes), dst(big_bytes);
  Fill(src.data(), big_bytes, 42);
  std::memset(dst.data(), 1, big_bytes);
  double memcpy_gbps = MemcpyGbps(dst.data(), src.data(), big_bytes);
  dst.clear();
  dst.shrink_to_fit();

  nlohmann::json out;
  out["machine"] = {{"cpus", std::thread::hardware_concurrency()}};
  out["memcpy_gbps"] = memcpy_gbps;
  out["big_object"] = BenchBig(*a, src.data(), big_bytes, memcpy_gbps);
  out["small_objects"] = BenchSmall(*a, small_seconds);
  out["transfer"] = BenchTransfer(*a, *b, nodes[0], nodes[1], src.data(), big_bytes, transfer_rounds);
  out["transfer"]["vs_memcpy"] = out["transfer"]["gbps"].get<double>() / memcpy_gbps;
  out["spill"] = BenchSpill(*c, nodes[2], spill_store);
  std::cout << out.dump(2) << std::endl;
  bool ok = out["big_object"]["get_contents_intact"].get<bool>() && out["transfer"]["contents_intact"].get<bool>() &&
            out["spill"]["all_bytes_intact"].get<bool>();
  return ok ? 0 : 1;
}

}  // namespace manta::bench
