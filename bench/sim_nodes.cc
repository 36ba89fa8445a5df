#include "sim_nodes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>

#include "src/common/loop_call.h"
#include "src/common/rpc/grpc_server.h"
#include "src/common/util.h"

namespace manta::bench {

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A listening TCP socket on 127.0.0.1 and a free port (non-blocking); -1 on failure.
int ListenOnLoopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

// How gRPC names the peer of a connection: "ipv4:127.0.0.1:port" (and "fd:N" for
// one it was handed), both recorded.
std::string PeerName(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char ip[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
  return "ipv4:" + std::string(ip) + ":" + std::to_string(ntohs(addr.sin_port));
}

}  // namespace

struct SimNodes::Node {
  NodeID id = NodeID::FromRandom();
  int port = 0;
  bool alive = true;
  bool registered = false;
  bool table_read = false;
  bool polled = false;
  bool flip = false;  // alternates the reported availability, so every report is news
  bool declared_dead = false;  // by the GCS, while up
  double sim_available = 0;
  // Bundles prepared here: (group id, index) -> units of "sim".
  std::map<std::pair<std::string, int>, double> bundles;
  std::unique_ptr<gcs::GrpcGcsClient> gcs;
  std::unique_ptr<gcs::GcsSubscriber> subscriber;
  std::unique_ptr<Timer> report_timer;
};

// What the GCS calls on a raylet, for every simulated node at once.
class SimNodes::Service final : public rpc::NodeManagerService::CallbackService {
 public:
  explicit Service(SimNodes& sims) : sims_(sims) {}

  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* c, const rpc::HealthCheckRequest* q,
                                        rpc::HealthCheckReply* r) override {
    const int index = sims_.NodeOfPeer(c->peer());
    return rpc::ServeOnLoop(sims_.loop_, "Sim.HealthCheck", c, q, r,
                            [this, index](const rpc::HealthCheckRequest&, rpc::HealthCheckReply* reply,
                                          rpc::SendReply send) { sims_.HealthCheck(index, reply, std::move(send)); });
  }
  grpc::ServerUnaryReactor* PrepareBundleResources(grpc::CallbackServerContext* c,
                                                   const rpc::PrepareBundleResourcesRequest* q,
                                                   rpc::PrepareBundleResourcesReply* r) override {
    const int index = sims_.NodeOfPeer(c->peer());
    return rpc::ServeOnLoop(sims_.loop_, "Sim.Prepare", c, q, r,
                            [this, index](const rpc::PrepareBundleResourcesRequest& req,
                                          rpc::PrepareBundleResourcesReply* reply, rpc::SendReply send) {
                              sims_.Prepare(index, req, reply, std::move(send));
                            });
  }
  grpc::ServerUnaryReactor* CommitBundleResources(grpc::CallbackServerContext* c,
                                                  const rpc::CommitBundleResourcesRequest* q,
                                                  rpc::CommitBundleResourcesReply* r) override {
    // Prepared units are already taken; committing changes nothing the GCS sees.
    return rpc::ServeOnLoop(sims_.loop_, "Sim.Commit", c, q, r,
                            [](const rpc::CommitBundleResourcesRequest&, rpc::CommitBundleResourcesReply*,
                               rpc::SendReply send) { std::move(send)(absl::OkStatus()); });
  }
  grpc::ServerUnaryReactor* CancelResourceReserve(grpc::CallbackServerContext* c,
                                                  const rpc::CancelResourceReserveRequest* q,
                                                  rpc::CancelResourceReserveReply* r) override {
    const int index = sims_.NodeOfPeer(c->peer());
    return rpc::ServeOnLoop(sims_.loop_, "Sim.Cancel", c, q, r,
                            [this, index](const rpc::CancelResourceReserveRequest& req,
                                          rpc::CancelResourceReserveReply*, rpc::SendReply send) {
                              sims_.Cancel(index, req.bundle(), std::move(send));
                            });
  }
  grpc::ServerUnaryReactor* ReleaseUnusedBundles(grpc::CallbackServerContext* c,
                                                 const rpc::ReleaseUnusedBundlesRequest* q,
                                                 rpc::ReleaseUnusedBundlesReply* r) override {
    const int index = sims_.NodeOfPeer(c->peer());
    return rpc::ServeOnLoop(sims_.loop_, "Sim.ReleaseUnused", c, q, r,
                            [this, index](const rpc::ReleaseUnusedBundlesRequest& req,
                                          rpc::ReleaseUnusedBundlesReply*, rpc::SendReply send) {
                              sims_.ReleaseUnused(index, req, std::move(send));
                            });
  }

 private:
  SimNodes& sims_;
};

SimNodes::SimNodes(Options options) : options_(std::move(options)), loop_(/*slow_handler_warn_ms=*/1000) {
  rpc::KeepGrpcInitialized();
  client_options_.deadline_ms = 30000;
  service_ = std::make_unique<Service>(*this);
  grpc::ServerBuilder builder;
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  CHECK(server_ != nullptr) << "cannot start the simulated nodes' gRPC server";
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0) << "epoll/eventfd";
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = UINT32_MAX;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  loop_thread_ = std::thread([this] { loop_.Run(); });
}

SimNodes::~SimNodes() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  accept_thread_.join();
  // Nothing more is sent; what is in flight is cancelled and its callbacks run.
  OnLoop([this] {
    for (auto& node : nodes_) {
      node->report_timer.reset();
      node->subscriber.reset();
      if (node->gcs) node->gcs->CancelAll();
    }
  });
  DrainCallbacks(
      loop_,
      [this] {
        int64_t n = 0;
        for (auto& node : nodes_) n += node->gcs ? node->gcs->InFlight() : 0;
        return n;
      },
      5000);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  loop_.Stop();
  loop_thread_.join();
  absl::MutexLock lock(&mu_);
  for (int fd : listen_fds_) {
    if (fd >= 0) close(fd);
  }
  close(epoll_fd_);
  close(wake_fd_);
}

int SimNodes::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(listen_fds_.size());
}

void SimNodes::OnLoop(std::function<void()> fn) {
  std::promise<void> done;
  loop_.Post("Sim.OnLoop", [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

bool SimNodes::WaitFor(const std::function<bool()>& done, int64_t timeout_ms) {
  const int64_t deadline = NowNs() + timeout_ms * 1000000;
  while (true) {
    bool ok = false;
    OnLoop([&] { ok = done(); });
    if (ok) return true;
    if (NowNs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// ---------------------------------------------------------------- connections

void SimNodes::AcceptLoop() {
  epoll_event events[64];
  while (true) {
    int n = epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) PLOG(FATAL) << "epoll_wait";
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u32 == UINT32_MAX) return;
      AcceptOn(static_cast<int>(events[i].data.u32));
    }
  }
}

void SimNodes::AcceptOn(int index) {
  std::vector<int> accepted;
  {
    absl::MutexLock lock(&mu_);
    const int listen_fd = listen_fds_[index];
    if (listen_fd < 0) return;  // killed
    while (true) {
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      peers_[PeerName(fd)] = index;
      peers_["fd:" + std::to_string(fd)] = index;
      conns_[index].push_back(fd);
      accepted.push_back(fd);
    }
  }
  for (int fd : accepted) grpc::AddInsecureChannelFromFd(server_.get(), fd);
}

int SimNodes::NodeOfPeer(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(peer);
  return it == peers_.end() ? -1 : it->second;
}

void SimNodes::Kill(int index) {
  Node& node = *nodes_[index];
  node.alive = false;
  node.report_timer.reset();
  node.subscriber.reset();
  absl::MutexLock lock(&mu_);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fds_[index], nullptr);
  close(listen_fds_[index]);
  listen_fds_[index] = -1;
  // gRPC owns the connections: shut down, it sees them end and closes them.
  for (int fd : conns_[index]) shutdown(fd, SHUT_RDWR);
  conns_[index].clear();
}

// ---------------------------------------------------------------- nodes

rpc::NodeInfo SimNodes::MakeInfo(const Node& node) const {
  rpc::NodeInfo info;
  info.set_node_id(node.id.Binary());
  info.set_node_manager_address("127.0.0.1");
  info.set_node_manager_port(node.port);
  info.set_object_manager_port(node.port);
  info.set_state(rpc::NodeInfo::ALIVE);
  auto& total = *info.mutable_resources_total();
  total["sim_CPU"] = 16;
  total["sim_memory"] = 64.0 * (1 << 30);
  total["sim_object_store_memory"] = 20.0 * (1 << 30);
  total["sim"] = options_.sim_units;
  info.set_node_name("sim-" + node.id.Hex().substr(0, 8));
  info.set_start_time_ms(NowMs());
  info.set_raylet_pid(getpid());
  return info;
}

void SimNodes::StartNode(int index) {
  Node& node = *nodes_[index];
  node.sim_available = options_.sim_units;
  node.gcs = std::make_unique<gcs::GrpcGcsClient>(loop_, options_.gcs_address, client_options_);
  node.gcs->AsyncRegisterNode(MakeInfo(node), [this, index](const absl::Status& s, rpc::RegisterNodeReply&&) {
    if (!s.ok()) {
      ++failures_;
      LOG(WARNING) << "simulated node " << index << " could not register: " << s;
      return;
    }
    OnRegistered(index);
  });
}

void SimNodes::OnRegistered(int index) {
  Node& node = *nodes_[index];
  node.registered = true;
  // As a raylet does: the node table, then the five channels, then reports.
  node.gcs->AsyncGetAllNodeInfo([this, index](const absl::Status& s, rpc::GetAllNodeInfoReply&&) {
    if (!s.ok()) ++failures_;
    nodes_[index]->table_read = s.ok();
  });
  node.subscriber = std::make_unique<gcs::GcsSubscriber>(
      loop_, *node.gcs,
      std::vector<rpc::ChannelType>{rpc::GCS_NODE_INFO_CHANNEL, rpc::RESOURCE_USAGE_CHANNEL, rpc::GCS_JOB_CHANNEL,
                                    rpc::GCS_WORKER_DELTA_CHANNEL, rpc::GCS_PLACEMENT_GROUP_CHANNEL},
      30000, [this, index](const rpc::PubMessage& m) { OnMessage(index, m); }, [] {});
  node.subscriber->SetOnPollResult([this, index](const absl::Status& s) {
    if (s.ok()) nodes_[index]->polled = true;
  });
  node.subscriber->Start();
  Report(index);
  // Spread over the period, as nodes started at different times would be: a report
  // at the node's phase, then one every period (so that every node reports within the
  // first period, not only from the second on).
  static std::mt19937_64 rng(42);
  const int64_t phase = static_cast<int64_t>(rng() % static_cast<uint64_t>(options_.report_ms));
  loop_.PostAfter("Sim.FirstReport", phase, [this, index] {
    if (!nodes_[index]->alive) return;
    Report(index);
    nodes_[index]->report_timer =
        loop_.RunEvery("Sim.Report", options_.report_ms, [this, index] { Report(index); });
  });
}

void SimNodes::Report(int index) {
  Node& node = *nodes_[index];
  node.flip = !node.flip;
  rpc::ResourceUsage usage;
  usage.set_node_id(node.id.Binary());
  rpc::NodeInfo info = MakeInfo(node);
  *usage.mutable_resources_total() = info.resources_total();
  *usage.mutable_resources_available() = info.resources_total();
  (*usage.mutable_resources_available())["sim_CPU"] = node.flip ? 15 : 16;
  (*usage.mutable_resources_available())["sim"] = node.sim_available;
  rpc::ObjectStoreStats* store = usage.mutable_object_store();
  store->set_capacity_bytes(int64_t{20} << 30);
  store->set_used_bytes(node.flip ? (int64_t{1} << 20) : 0);
  node.gcs->AsyncReportResourceUsage(usage, [this](const absl::Status& s, rpc::ReportResourceUsageReply&&) {
    if (!s.ok()) ++failures_;
  });
}

void SimNodes::OnMessage(int index, const rpc::PubMessage& m) {
  ++messages_;
  if (m.channel_type() == rpc::GCS_NODE_INFO_CHANNEL && m.node_info_message().state() == rpc::NodeInfo::DEAD) {
    auto it = index_of_.find(m.key_id());
    if (it != index_of_.end() && nodes_[it->second]->alive && !nodes_[it->second]->declared_dead) {
      nodes_[it->second]->declared_dead = true;
      ++declared_dead_;
    }
  }
  if (m.channel_type() != rpc::GCS_NODE_INFO_CHANNEL || m.key_id() != watched_id_ || watched_id_.empty()) return;
  const bool dead = m.node_info_message().state() == rpc::NodeInfo::DEAD;
  if (dead != watch_dead_ || !nodes_[index]->alive) return;
  arrivals_ms_.push_back(static_cast<double>(NowNs() - watch_start_ns_) / 1e6);
}

// ---------------------------------------------------------------- calls from the GCS

void SimNodes::HealthCheck(int index, rpc::HealthCheckReply* reply, rpc::SendReply send) {
  if (index < 0 || !nodes_[index]->alive) {
    std::move(send)(absl::UnavailableError("no such simulated node"));
    return;
  }
  reply->set_node_id(nodes_[index]->id.Binary());
  std::move(send)(absl::OkStatus());
}

void SimNodes::Prepare(int index, const rpc::PrepareBundleResourcesRequest& q, rpc::PrepareBundleResourcesReply* r,
                       rpc::SendReply send) {
  if (index < 0 || !nodes_[index]->alive) {
    std::move(send)(absl::UnavailableError("no such simulated node"));
    return;
  }
  Node& node = *nodes_[index];
  double wanted = 0;
  bool only_sim = true;
  for (const rpc::Bundle& b : q.bundles()) {
    for (const auto& [name, units] : b.unit_resources()) {
      if (name == "sim") wanted += units;
      else only_sim = false;
    }
  }
  const bool fits = only_sim && wanted <= node.sim_available + 1e-9;
  if (fits) {
    for (const rpc::Bundle& b : q.bundles()) {
      auto units = b.unit_resources().find("sim");
      double u = units == b.unit_resources().end() ? 0 : units->second;
      node.bundles[{b.placement_group_id(), b.bundle_index()}] = u;
      node.sim_available -= u;
    }
    Report(index);
  }
  r->set_success(fits);
  std::move(send)(absl::OkStatus());
}

void SimNodes::Cancel(int index, const rpc::Bundle& bundle, rpc::SendReply send) {
  if (index >= 0 && nodes_[index]->alive) {
    Node& node = *nodes_[index];
    auto it = node.bundles.find({bundle.placement_group_id(), bundle.bundle_index()});
    if (it != node.bundles.end()) {
      node.sim_available += it->second;
      node.bundles.erase(it);
      Report(index);
    }
  }
  std::move(send)(absl::OkStatus());
}

void SimNodes::ReleaseUnused(int index, const rpc::ReleaseUnusedBundlesRequest& q, rpc::SendReply send) {
  if (index >= 0 && nodes_[index]->alive) {
    Node& node = *nodes_[index];
    std::set<std::pair<std::string, int>> in_use;
    for (const rpc::Bundle& b : q.bundles_in_use()) in_use.insert({b.placement_group_id(), b.bundle_index()});
    for (auto it = node.bundles.begin(); it != node.bundles.end();) {
      if (in_use.count(it->first) > 0) {
        ++it;
        continue;
      }
      node.sim_available += it->second;
      it = node.bundles.erase(it);
    }
  }
  std::move(send)(absl::OkStatus());
}

// ---------------------------------------------------------------- what the benchmark times

absl::StatusOr<int> SimNodes::AddListener() {
  absl::MutexLock lock(&mu_);
  const int index = static_cast<int>(listen_fds_.size());
  int port = 0;
  int fd = ListenOnLoopback(&port);
  if (fd < 0) return absl::ResourceExhaustedError("cannot listen for simulated node " + std::to_string(index));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u32 = static_cast<uint32_t>(index);
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  listen_fds_.push_back(fd);
  conns_.emplace_back();
  return port;
}

int SimNodes::AddNode(int port) {
  nodes_.push_back(std::make_unique<Node>());
  nodes_.back()->port = port;
  const int index = static_cast<int>(nodes_.size()) - 1;
  index_of_[nodes_.back()->id.Binary()] = index;
  return index;
}

absl::Status SimNodes::GrowTo(int n, int64_t timeout_ms) {
  std::vector<int> ports;
  for (int i = size(); i < n; ++i) {
    absl::StatusOr<int> port = AddListener();
    if (!port.ok()) return port.status();
    ports.push_back(*port);
  }
  OnLoop([&] {
    for (int port : ports) StartNode(AddNode(port));
  });
  const bool up = WaitFor(
      [this] {
        return std::all_of(nodes_.begin(), nodes_.end(), [](const std::unique_ptr<Node>& node) {
          return !node->alive || (node->registered && node->table_read && node->polled);
        });
      },
      timeout_ms);
  if (!up) return absl::DeadlineExceededError(std::to_string(n) + " simulated nodes were not all up in time");
  return absl::OkStatus();
}

std::vector<double> SimNodes::FanOutOfNewNode(int64_t timeout_ms) {
  absl::StatusOr<int> port = AddListener();
  if (!port.ok()) return {};
  int alive = 0;
  OnLoop([&] {
    for (auto& node : nodes_) alive += node->alive;
    const int index = AddNode(*port);
    arrivals_ms_.clear();
    watch_dead_ = false;
    watched_id_ = nodes_[index]->id.Binary();
    watch_start_ns_ = NowNs();
    StartNode(index);
  });
  WaitFor([&] { return static_cast<int>(arrivals_ms_.size()) >= alive; }, timeout_ms);
  std::vector<double> arrivals;
  OnLoop([&] {
    arrivals = arrivals_ms_;
    watched_id_.clear();
  });
  std::sort(arrivals.begin(), arrivals.end());
  return arrivals;
}

absl::StatusOr<std::pair<double, double>> SimNodes::TimeToNoticeDeath(int64_t timeout_ms) {
  int observers = 0;
  OnLoop([&] {
    int victim = -1;
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
      if (!nodes_[i]->alive) continue;
      if (victim < 0) {
        victim = i;
      } else {
        ++observers;
      }
    }
    if (victim < 0) return;
    arrivals_ms_.clear();
    watch_dead_ = true;
    watched_id_ = nodes_[victim]->id.Binary();
    watch_start_ns_ = NowNs();
    Kill(victim);
  });
  if (observers == 0) return absl::FailedPreconditionError("needs two simulated nodes up");
  WaitFor([&] { return static_cast<int>(arrivals_ms_.size()) >= observers; }, timeout_ms);
  std::vector<double> arrivals;
  OnLoop([&] {
    arrivals = arrivals_ms_;
    watched_id_.clear();
  });
  if (arrivals.empty()) return absl::DeadlineExceededError("no node heard of the death in time");
  std::sort(arrivals.begin(), arrivals.end());
  return std::make_pair(arrivals.front(), arrivals.back());
}

ProcUsage ReadProcUsage(pid_t pid) {
  ProcUsage usage;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the command (which may hold spaces): state is field 3; utime 14, stime 15.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i >= 14) ticks += std::stod(field);
    }
    usage.cpu_s = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) usage.rss_mb = std::stod(line.substr(6)) / 1024.0;
  }
  return usage;
}

}  // namespace manta::bench
