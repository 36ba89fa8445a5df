#include "src/core_worker/core_worker_process.h"

#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <string_view>
#include <thread>

#include "protos/core_worker.grpc.pb.h"
#include "src/common/logging.h"
#include "src/common/loop_call.h"
#include "src/common/network.h"
#include "src/common/process.h"
#include "src/common/rpc/grpc_server.h"
#include "src/common/rpc/network_limits.h"
#include "src/common/security.h"
#include "src/common/status_util.h"
#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/core_worker/local_node.h"
#include "src/gcs/gcs_client.h"
#include "src/object_store/store_client.h"
#include "src/common/node_address.h"

namespace manta::core {

// The CoreWorkerService front: every handler runs on the loop. (Tasks do not come
// this way: they travel over the task channel.) Bound before the CoreWorker
// exists, so that its port can be registered; calls before then are UNAVAILABLE.
class CoreWorkerProcess::Service final : public rpc::CoreWorkerService::CallbackService {
 public:
  explicit Service(EventLoop& loop) : loop_(loop) {}
  void Serve(CoreWorker* core) { core_.store(core); }

  grpc::ServerUnaryReactor* GetObjectStatus(grpc::CallbackServerContext* c, const rpc::GetObjectStatusRequest* q,
                                            rpc::GetObjectStatusReply* r) override {
    return Handle("CoreWorker.GetObjectStatus", c, q, r, &CoreWorker::HandleGetObjectStatus);
  }
  grpc::ServerUnaryReactor* WaitForRefRemoved(grpc::CallbackServerContext* c,
                                              const rpc::WaitForRefRemovedRequest* q,
                                              rpc::WaitForRefRemovedReply* r) override {
    return Handle("CoreWorker.WaitForRefRemoved", c, q, r, &CoreWorker::HandleWaitForRefRemoved);
  }
  grpc::ServerUnaryReactor* AddObjectLocation(grpc::CallbackServerContext* c,
                                              const rpc::AddObjectLocationRequest* q,
                                              rpc::AddObjectLocationReply* r) override {
    return Handle("CoreWorker.AddObjectLocation", c, q, r, &CoreWorker::HandleAddObjectLocation);
  }
  grpc::ServerUnaryReactor* Exit(grpc::CallbackServerContext* c, const rpc::ExitRequest* q,
                                 rpc::ExitReply* r) override {
    return Handle("CoreWorker.Exit", c, q, r, &CoreWorker::HandleExit);
  }
  grpc::ServerUnaryReactor* ListObjects(grpc::CallbackServerContext* c, const rpc::ListObjectsRequest* q,
                                        rpc::ListObjectsReply* r) override {
    return Handle("CoreWorker.ListObjects", c, q, r, &CoreWorker::HandleListObjects);
  }
  grpc::ServerUnaryReactor* CancelTask(grpc::CallbackServerContext* c, const rpc::CancelTaskRequest* q,
                                       rpc::CancelTaskReply* r) override {
    return Handle("CoreWorker.CancelTask", c, q, r, &CoreWorker::HandleCancelTask);
  }
  grpc::ServerUnaryReactor* RemoteCancelTask(grpc::CallbackServerContext* c, const rpc::RemoteCancelTaskRequest* q,
                                             rpc::RemoteCancelTaskReply* r) override {
    return Handle("CoreWorker.RemoteCancelTask", c, q, r, &CoreWorker::HandleRemoteCancelTask);
  }
  grpc::ServerUnaryReactor* StreamConsumed(grpc::CallbackServerContext* c, const rpc::StreamConsumedRequest* q,
                                           rpc::StreamConsumedReply* r) override {
    return Handle("CoreWorker.StreamConsumed", c, q, r, &CoreWorker::HandleStreamConsumed);
  }

 private:
  template <typename Request, typename Reply>
  grpc::ServerUnaryReactor* Handle(const char* name, grpc::CallbackServerContext* c, const Request* q, Reply* r,
                                   void (CoreWorker::*method)(const Request&, Reply*,
                                                              std::function<void(absl::Status)>)) {
    return rpc::ServeOnLoop(loop_, name, c, q, r,
                            [this, method](const Request& request, Reply* reply, rpc::SendReply send) {
                              CoreWorker* core = core_.load();
                              if (core == nullptr) {
                                return std::move(send)(absl::UnavailableError("the core worker is starting"));
                              }
                              // The handlers take a copyable callback; the call is still answered once.
                              auto once = std::make_shared<rpc::SendReply>(std::move(send));
                              (core->*method)(request, reply,
                                              [once](absl::Status s) { std::move(*once)(std::move(s)); });
                            });
  }

  EventLoop& loop_;
  std::atomic<CoreWorker*> core_{nullptr};
};

namespace {

rpc::ClientOptions MakeClientOptions(const Config& config) {
  std::shared_ptr<rpc::FaultInjector> faults;
  if (!config.testing_rpc_failure.empty()) {
    auto parsed = rpc::FaultInjector::Parse(config.testing_rpc_failure);
    if (parsed.ok()) {
      faults = std::make_shared<rpc::FaultInjector>(*parsed);
    } else {
      LOG(WARNING) << "ignoring testing_rpc_failure: " << parsed.status();
    }
  }
  return rpc::ClientOptionsFromConfig(config, std::move(faults));
}

}  // namespace

CoreWorkerProcess::CoreWorkerProcess(CoreWorkerOptions options)
    : options_(std::move(options)), loop_(options_.config.slow_handler_warn_ms) {
  if (options_.worker_id.IsNil()) options_.worker_id = WorkerID::FromRandom();
}

absl::StatusOr<std::unique_ptr<CoreWorkerProcess>> CoreWorkerProcess::Start(CoreWorkerOptions options) {
  std::unique_ptr<CoreWorkerProcess> process(new CoreWorkerProcess(std::move(options)));
  absl::Status s = process->Connect();
  if (!s.ok()) {
    process->Shutdown();
    return s;
  }
  return process;
}

CoreWorkerProcess::~CoreWorkerProcess() { Shutdown(); }

absl::Status CoreWorkerProcess::Connect() {
  RaiseOpenFileLimit();  // many owners and workers may connect to this process
  if (auto s = CheckTokenFormat(options_.credentials.token); !s.ok()) {
    return absl::UnauthenticatedError("no valid cluster token to join the cluster with: " + std::string(s.message()));
  }
  auto protection = ParseChannelProtection(options_.config.task_channel_protection, options_.credentials.tls());
  if (!protection.ok()) return protection.status();
  const TaskChannelSecurity channel_security{options_.credentials.token, *protection};
  rpc::SetProcessCredentials(options_.credentials);
  rpc::SetNetworkLimits(rpc::NetworkLimitsFromConfig(options_.config));
  loop_thread_ = std::thread([this] { loop_.Run(); });

  MakeClients(MakeClientOptions(options_.config), channel_security);
  if (options_.is_driver && options_.raylet_address.empty()) MANTA_RETURN_IF_ERROR(FindLocalRaylet());
  if (options_.node_ip_address.empty()) {
    auto raylet = ParseHostPort(options_.raylet_address);
    if (!raylet.ok()) return raylet.status();
    options_.node_ip_address = raylet->host;
  }
  MANTA_RETURN_IF_ERROR(StartServers(channel_security));
  if (options_.is_driver) MANTA_RETURN_IF_ERROR(CreateJob());
  NodeID node_id;
  std::string store_socket;
  MANTA_RETURN_IF_ERROR(RegisterWithRaylet(&node_id, &store_socket));
  MANTA_RETURN_IF_ERROR(ConnectStore(store_socket));

  Address self{node_id, options_.node_ip_address, server_->port(), options_.worker_id};
  core_ = std::make_unique<CoreWorker>(
      options_, CoreWorkerParts{loop_, *gcs_, *raylets_, *workers_, *channels_, channel_server_.get(), *store_, self});
  service_->Serve(core_.get());
  if (options_.is_driver) MANTA_RETURN_IF_ERROR(AddJob());
  VLOG(1) << (options_.is_driver ? "driver " : "worker ") << options_.worker_id.Hex() << " of job "
          << options_.job_id.Hex() << " serving at " << HostPort(self);
  return absl::OkStatus();
}

void CoreWorkerProcess::MakeClients(const rpc::ClientOptions& client_options,
                                    const TaskChannelSecurity& channel_security) {
  gcs_ = std::make_unique<gcs::GrpcGcsClient>(
      loop_, options_.gcs_address, client_options,
      gcs::PlacementWaitTimes{options_.config.placement_group_wait_slice_ms,
                              options_.config.placement_group_wait_retry_ms});
  raylets_ = std::make_unique<RayletClientPool>([this, client_options](const std::string& address) {
    return MakeGrpcRayletClient(loop_, address, client_options);
  });
  workers_ = std::make_unique<CoreWorkerClientPool>([this, client_options](const std::string& address) {
    return MakeGrpcCoreWorkerClient(loop_, address, client_options);
  });
  channels_ = std::make_unique<TaskChannelPool>([this, channel_security](const std::string& key) {
    return MakeTcpTaskChannel(loop_, TaskChannelAddress(key), options_.config.grpc_max_message_bytes,
                              channel_security);
  });
}

absl::Status CoreWorkerProcess::StartServers(const TaskChannelSecurity& channel_security) {
  const Config& config = options_.config;
  const std::string& bind = options_.bind_address.empty() ? options_.node_ip_address : options_.bind_address;
  service_ = std::make_unique<Service>(loop_);
  server_ = std::make_unique<rpc::GrpcServer>(options_.is_driver ? "driver" : "worker", bind, 0,
                                              config.grpc_max_message_bytes);
  server_->RegisterService(service_.get());
  MANTA_RETURN_IF_ERROR(server_->Start());
  if (!options_.is_driver) {
    auto channel_server = TaskChannelServer::Listen(bind, config.grpc_max_message_bytes, channel_security);
    if (!channel_server.ok()) return channel_server.status();
    channel_server_ = std::move(*channel_server);
  }
  return absl::OkStatus();
}

absl::Status CoreWorkerProcess::FindLocalRaylet() {
  auto nodes = CallOnLoop<rpc::GetAllNodeInfoReply>(
      loop_, [this](auto callback) { gcs_->AsyncGetAllNodeInfo(std::move(callback)); },
      options_.config.grpc_client_deadline_ms);
  if (!nodes.ok()) {
    const absl::Status& s = nodes.status();
    return absl::UnavailableError("cannot reach the GCS at " + options_.gcs_address + ": " +
                                  std::string(s.message()) + (absl::IsUnavailable(s) ? rpc::TlsHint() : ""));
  }
  // This machine's address as the cluster sees it: the one set, else the one the
  // kernel reaches the GCS from.
  std::string preferred = options_.node_ip_address;
  if (preferred.empty()) {
    auto gcs = ParseHostPort(options_.gcs_address);
    if (gcs.ok()) preferred = SourceAddressTo(gcs->host).value_or("");
  }
  std::string addresses;
  for (const std::string& a : LocalIpv4Addresses()) addresses += (addresses.empty() ? "" : ", ") + a;
  auto chosen = ChooseLocalNode(*nodes, preferred, IsLocalAddress, addresses, options_.gcs_address);
  if (!chosen.ok()) return chosen.status();
  options_.raylet_address = RayletAddress(*chosen);
  return absl::OkStatus();
}

absl::Status CoreWorkerProcess::CreateJob() {
  auto reply = CallOnLoop<rpc::GetNextJobIDReply>(
      loop_, [this](auto callback) { gcs_->AsyncGetNextJobID(std::move(callback)); },
      options_.config.grpc_client_deadline_ms);
  if (!reply.ok()) {
    return absl::UnavailableError("cannot create a job at the GCS: " + std::string(reply.status().message()));
  }
  auto id = JobID::FromBinaryChecked(reply->job_id());
  if (!id.ok()) return absl::InternalError("the GCS returned a malformed job id");
  options_.job_id = *id;
  return absl::OkStatus();
}

absl::Status CoreWorkerProcess::RegisterWithRaylet(NodeID* node_id, std::string* store_socket) {
  rpc::RegisterWorkerRequest request;
  request.set_worker_type(options_.is_driver ? rpc::DRIVER : rpc::WORKER);
  request.set_worker_id(options_.worker_id.Binary());
  request.set_job_id(options_.job_id.Binary());
  request.set_pid(getpid());
  request.mutable_address()->set_ip_address(options_.node_ip_address);
  request.mutable_address()->set_port(server_->port());
  request.mutable_address()->set_worker_id(options_.worker_id.Binary());
  if (channel_server_) request.mutable_address()->set_task_port(channel_server_->port());
  request.set_startup_token(options_.startup_token);
  auto raylet = raylets_->Get(options_.raylet_address);
  auto registered = CallOnLoop<rpc::RegisterWorkerReply>(
      loop_, [raylet, request](auto callback) { raylet->RegisterWorker(request, std::move(callback)); },
      options_.config.grpc_client_deadline_ms);
  if (!registered.ok()) {
    return absl::UnavailableError("cannot register with the raylet at " + options_.raylet_address + ": " +
                                  std::string(registered.status().message()));
  }
  auto node = NodeID::FromBinaryChecked(registered->node_id());
  if (!node.ok()) return absl::InternalError("the raylet returned a malformed node id");
  *node_id = *node;
  *store_socket = registered->object_store_socket();
  if (options_.is_driver) AdoptNodeConfig(registered->config());
  return absl::OkStatus();
}

void CoreWorkerProcess::AdoptNodeConfig(const google::protobuf::Map<std::string, std::string>& node_config) {
  for (const auto& [variable, value] : node_config) {
    constexpr std::string_view kPrefix = "MANTA_";
    if (variable.rfind(kPrefix, 0) != 0 || std::getenv(variable.c_str()) != nullptr) continue;
    absl::Status s = options_.config.Set(variable.substr(kPrefix.size()), value);
    if (!s.ok()) LOG(WARNING) << "ignoring the node's " << variable << ": " << s.message();
  }
}

absl::Status CoreWorkerProcess::ConnectStore(const std::string& store_socket) {
  auto store = object_store::ObjectStoreClient::Connect(store_socket, options_.worker_id.Hex());
  if (!store.ok()) {
    return absl::UnavailableError("cannot connect to the object store at " + store_socket + ": " +
                                  std::string(store.status().message()));
  }
  store_ = std::move(*store);
  return absl::OkStatus();
}

absl::Status CoreWorkerProcess::AddJob() {
  rpc::JobInfo job;
  job.set_job_id(options_.job_id.Binary());
  *job.mutable_driver_address() = core_->address();
  job.set_driver_pid(getpid());
  job.set_ray_namespace(options_.job_config.ray_namespace());
  job.set_start_time_ms(NowMs());
  job.set_entrypoint(options_.driver_entrypoint);
  job.set_driver_ip_address(options_.node_ip_address);
  *job.mutable_config() = options_.job_config;
  return RunOnLoopAndWait(
      loop_,
      [this, job](std::function<void(absl::Status)> done) {
        gcs_->AsyncAddJob(job, [done](const absl::Status& s, rpc::AddJobReply&&) { done(s); });
      },
      options_.config.grpc_client_deadline_ms);
}

void CoreWorkerProcess::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (core_) {
    core_->Shutdown([this] { CancelRpcsAndDrain(2000); });
  } else if (loop_thread_.joinable()) {
    CancelRpcsAndDrain(2000);
  }
  if (server_) server_->Shutdown(100);
  loop_.Stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  // Callbacks still queued on the stopped loop refer to the parts: they stay until
  // the loop itself goes (members are destroyed in reverse order).
}

void CoreWorkerProcess::CancelRpcsAndDrain(int64_t timeout_ms) {
  // Callbacks of calls in flight post to the loop: they must run before it goes.
  auto in_flight = [this] {
    int64_t n = gcs_ ? gcs_->InFlight() : 0;
    if (raylets_) raylets_->ForEach([&n](RayletClientInterface& c) { n += c.InFlight(); });
    if (workers_) workers_->ForEach([&n](CoreWorkerClientInterface& c) { n += c.InFlight(); });
    if (channels_) channels_->ForEach([&n](TaskChannelInterface& c) { n += c.InFlight(); });
    return n;
  };
  if (gcs_) gcs_->CancelAll();
  if (raylets_) raylets_->ForEach([](RayletClientInterface& c) { c.CancelAll(); });
  if (workers_) workers_->ForEach([](CoreWorkerClientInterface& c) { c.CancelAll(); });
  if (channels_) channels_->ForEach([](TaskChannelInterface& c) { c.CancelAll(); });
  DrainCallbacks(loop_, in_flight, timeout_ms);
  if (int64_t left = in_flight(); left > 0) LOG(WARNING) << left << " RPCs still in flight at shutdown";
}

}  // namespace manta::core
