// The native runtime: RayRuntime over a core worker connected to a cluster.
//
// In a driver it joins the cluster at the resolved address, or starts a private
// LocalCluster when there is none. In a worker (MANTA_WORKER_MODE=1, started by a
// raylet from the driver's own binary or as the generic manta_worker) it registers
// with its raylet, installs itself, serves pushed tasks on the calling thread and
// exits the process when told to, never returning to the caller of ray::Init.
#include <dlfcn.h>
#include <glog/logging.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string_view>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "ray/api/coroutine.h"
#include "ray/api/function_manager.h"
#include "ray/api/ray_exception.h"
#include "src/api/exception_util.h"
#include "src/api/local_cluster.h"
#include "src/api/native_runtime.h"
#include "src/api/runtime_factory.h"
#include "src/api/task_executor.h"
#include "src/api/task_runtime_env.h"
#include "src/common/crash_stack.h"
#include "src/common/cluster_tls.h"
#include "src/common/config.h"
#include "src/common/util.h"
#include "src/common/logging.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/security.h"
#include "src/core_worker/core_worker.h"
#include "src/core_worker/core_worker_process.h"

namespace ray {
namespace internal {
namespace {

using manta::ObjectID;
using manta::core::CoreWorker;
using manta::core::CoreWorkerProcess;

ErrorKind KindOf(int error_type) {
  switch (error_type) {
    case manta::rpc::TASK_EXECUTION_EXCEPTION:
      return ErrorKind::kTask;
    case manta::rpc::WORKER_DIED:
    case manta::rpc::NODE_DIED:
      return ErrorKind::kWorker;
    case manta::rpc::FUNCTION_NOT_FOUND:
      return ErrorKind::kFunctionNotFound;
    case manta::rpc::OWNER_DIED:
      return ErrorKind::kOwnerDied;
    case manta::rpc::OBJECT_LOST:
      return ErrorKind::kUnreconstructable;
    case manta::rpc::ACTOR_DIED:
      return ErrorKind::kActor;
    case manta::rpc::RUNTIME_ENV_SETUP_FAILED:
      return ErrorKind::kRuntimeEnv;
    case manta::rpc::TASK_CANCELLED:
      return ErrorKind::kCancelled;
    case manta::rpc::PLACEMENT_GROUP_REMOVED:  // as Ray: a plain RayException naming the group
    case manta::rpc::TASK_CHANNEL_REFUSED:     // a configuration error: a RayException with the reason
    default:
      return ErrorKind::kOther;
  }
}

ObjectID ParseId(const std::string& id) {
  auto parsed = ObjectID::FromBinaryChecked(id);
  if (!parsed.ok()) throw RayException("invalid object id (" + std::to_string(id.size()) + " bytes, expected 28)");
  return *parsed;
}

manta::ActorID ParseActorId(const std::string& id) {
  auto parsed = manta::ActorID::FromBinaryChecked(id);
  if (!parsed.ok()) throw RayException("invalid actor id (" + std::to_string(id.size()) + " bytes, expected 16)");
  return *parsed;
}

manta::PlacementGroupID ParsePlacementGroupId(const std::string& id) {
  auto parsed = manta::PlacementGroupID::FromBinaryChecked(id);
  if (!parsed.ok()) {
    throw RayException("invalid placement group id (" + std::to_string(id.size()) + " bytes, expected 18)");
  }
  return *parsed;
}

// Where a task or actor runs, as the core worker takes it.
manta::core::Placement ToCorePlacement(const PlacementOptions& placement) {
  manta::core::Placement out;
  if (placement.group_id.empty()) return out;
  out.group = ParsePlacementGroupId(placement.group_id);
  out.bundle_index = placement.bundle_index;
  return out;
}

// A group as the API reports it. The API's enums share their values with the
// protos'; a value the API does not know (a newer GCS) reads as UNRECOGNIZED.
PlacementGroupInfo ToPlacementGroupInfo(const manta::rpc::PlacementGroupTableData& data) {
  PlacementGroupInfo info;
  info.id = data.placement_group_id();
  info.options.name = data.name();
  for (const manta::rpc::Bundle& bundle : data.bundles()) {
    info.options.bundles.emplace_back(bundle.unit_resources().begin(), bundle.unit_resources().end());
  }
  const int strategy = data.strategy();
  info.options.strategy = strategy >= 0 && strategy <= static_cast<int>(PlacementStrategy::STRICT_SPREAD)
                              ? static_cast<PlacementStrategy>(strategy)
                              : PlacementStrategy::UNRECOGNIZED;
  const int state = data.state();
  info.state = state >= 0 && state <= static_cast<int>(PlacementGroupState::RESCHEDULING)
                   ? static_cast<PlacementGroupState>(state)
                   : PlacementGroupState::UNRECOGNIZED;
  return info;
}

std::vector<ObjectID> ParseIds(const std::vector<std::string>& ids) {
  std::vector<ObjectID> out;
  out.reserve(ids.size());
  for (const auto& id : ids) out.push_back(ParseId(id));
  return out;
}

[[noreturn]] void ThrowStatus(const std::string& what, const absl::Status& s) {
  if (s.code() == absl::StatusCode::kDeadlineExceeded) ThrowError(ErrorKind::kTimeout, std::string(s.message()));
  throw RayException(what + ": " + std::string(s.message()));
}

class NativeRuntime final : public RayRuntime {
 public:
  // `runtime_env`: the env this process's tasks and actors inherit (a driver: the
  // job's; a worker: the one it was started for), canonical, "" = none.
  NativeRuntime(std::unique_ptr<CoreWorkerProcess> process, std::unique_ptr<LocalCluster> cluster,
                int64_t max_inline_arg_bytes, std::string runtime_env)
      : process_(std::move(process)), core_(&process_->core()), cluster_(std::move(cluster)),
        max_inline_arg_bytes_(max_inline_arg_bytes), runtime_env_(std::move(runtime_env)) {}
  ~NativeRuntime() override {
    process_->Shutdown();
    core_ = nullptr;
    process_.reset();
    cluster_.reset();
  }

  CoreWorker& core() { return *core_; }

  std::string Put(SerializedValue value) override {
    auto id = core_->Put(value.size, value.write, ParseIds(value.contained_ids));
    if (!id.ok()) ThrowStatus("ray::Put failed", id.status());
    return id->Binary();
  }

  std::vector<ObjectData> Get(const std::vector<std::string>& ids, int64_t timeout_ms) override {
    auto values = core_->Get(ParseIds(ids), timeout_ms);
    if (!values.ok()) ThrowStatus("ray::Get failed", values.status());
    std::vector<ObjectData> out(values->size());
    for (size_t i = 0; i < values->size(); ++i) {
      manta::core::ObjectValue& v = (*values)[i];
      if (v.error) ThrowError(KindOf(v.error->error_type), std::string(v.error->error.message()));
      out[i].data = v.data;
      out[i].size = v.size;
      out[i].holder = std::move(v.holder);
      out[i].object_id = ids[i];
    }
    return out;
  }

  std::vector<bool> Wait(const std::vector<std::string>& ids, int num_objects, int64_t timeout_ms,
                         bool fetch_local) override {
    return core_->Wait(ParseIds(ids), num_objects, timeout_ms, fetch_local);
  }

  std::vector<std::string> SubmitTask(const std::string& function_name, std::vector<TaskArgument> args,
                                      const TaskOptions& options) override {
    std::string env = TaskRuntimeEnv(runtime_env_, options.serialized_runtime_env,
                                     "ray::Task(" + function_name + ").SetRuntimeEnv");
    manta::core::TaskOptions core_options;
    core_options.name = options.name;
    core_options.resources.insert(options.resources.begin(), options.resources.end());
    core_options.max_retries = options.max_retries;
    core_options.runtime_env = std::move(env);
    core_options.placement = ToCorePlacement(options.placement);
    core_options.num_returns = options.num_returns;
    core_options.stream = {options.streaming, options.backpressure_num_objects};
    Arguments converted = ConvertArguments(function_name, args);
    auto ids = core_->SubmitTask(function_name, std::move(converted.inputs), core_options);
    converted.ReleaseTemporaries(*core_);  // the submitted task holds its arguments now
    if (!ids.ok()) ThrowStatus("submitting " + function_name + " failed", ids.status());
    std::vector<std::string> out;
    out.reserve(ids->size());
    for (const ObjectID& id : *ids) out.push_back(id.Binary());
    return out;
  }

  CreatedActor CreateActor(const std::string& factory_name, std::vector<TaskArgument> args,
                           const ActorCreationOptions& options) override {
    std::string env = TaskRuntimeEnv(runtime_env_, options.serialized_runtime_env,
                                     "ray::Actor(" + factory_name + ").SetRuntimeEnv");
    manta::core::ActorCreationOptions core_options;
    core_options.placement = ToCorePlacement(options.placement);
    Arguments converted = ConvertArguments(factory_name, args);
    core_options.runtime_env = std::move(env);
    core_options.name = options.name;
    core_options.ray_namespace = options.ray_namespace;
    core_options.detached = options.detached < 0 ? core_->default_actor_detached() : options.detached > 0;
    core_options.max_restarts = options.max_restarts;
    core_options.max_concurrency = options.max_concurrency;
    core_options.resources.insert(options.resources.begin(), options.resources.end());
    core_options.class_name = options.class_name;
    auto created = core_->CreateActor(factory_name, std::move(converted.inputs), core_options);
    converted.ReleaseTemporaries(*core_);
    if (!created.ok()) {
      if (created.status().code() == absl::StatusCode::kAlreadyExists) {
        throw RayException("ray::Actor(" + factory_name + ").Remote(): " + std::string(created.status().message()));
      }
      ThrowStatus("creating an actor with " + factory_name + " failed", created.status());
    }
    return CreatedActor{created->actor_id.Binary(), created->handle_object.Binary()};
  }

  std::string SubmitActorTask(const std::string& actor_id, const std::string& handle_object_id,
                              const std::string& method_name, std::vector<TaskArgument> args,
                              const TaskOptions& options) override {
    manta::ActorID actor = ParseActorId(actor_id);
    std::optional<ObjectID> handle;
    if (auto h = ObjectID::FromBinaryChecked(handle_object_id); h.ok()) handle = *h;
    Arguments converted = ConvertArguments(method_name, args);
    auto id = core_->SubmitActorTask(actor, method_name, std::move(converted.inputs), options.name,
                                     options.max_retries < 0 ? 0 : options.max_retries, handle,
                                     {options.streaming, options.backpressure_num_objects});
    converted.ReleaseTemporaries(*core_);
    if (!id.ok()) ThrowStatus("calling " + method_name + " of actor " + actor.Hex() + " failed", id.status());
    return id->Binary();
  }

  void KillActor(const std::string& actor_id, bool no_restart) override {
    manta::ActorID actor = ParseActorId(actor_id);
    absl::Status s = core_->KillActor(actor, no_restart);
    if (!s.ok()) ThrowStatus("ActorHandle::Kill of actor " + actor.Hex(), s);
  }

  std::string GetNamedActor(const std::string& name, const std::string& ray_namespace) override {
    auto found = core_->GetNamedActor(name, ray_namespace);
    if (!found.ok()) ThrowStatus("ray::GetActor(\"" + name + "\")", found.status());
    return found->has_value() ? (*found)->actor_id() : std::string();
  }

  std::string GetNamespace() override { return core_->ray_namespace(); }

  PlacementGroupInfo CreatePlacementGroup(const PlacementGroupCreationOptions& options) override {
    std::vector<std::map<std::string, double>> bundles;
    for (const auto& bundle : options.bundles) bundles.emplace_back(bundle.begin(), bundle.end());
    auto id = core_->placement_groups().Create(options.name, bundles,
                                          static_cast<manta::rpc::PlacementStrategy>(options.strategy));
    if (!id.ok()) ThrowStatus("ray::CreatePlacementGroup", id.status());
    return PlacementGroupInfo{id->Binary(), options, PlacementGroupState::PENDING};
  }

  void RemovePlacementGroup(const std::string& group_id) override {
    manta::PlacementGroupID id = ParsePlacementGroupId(group_id);
    absl::Status s = core_->placement_groups().Remove(id);
    if (absl::IsNotFound(s)) {
      throw RayException("ray::RemovePlacementGroup: placement group " + id.Hex() + " was never created (" +
                         std::string(s.message()) + ")");
    }
    if (!s.ok()) ThrowStatus("ray::RemovePlacementGroup", s);
  }

  bool WaitPlacementGroupReady(const std::string& group_id, int64_t timeout_ms) override {
    manta::PlacementGroupID id = ParsePlacementGroupId(group_id);
    auto ready = core_->placement_groups().WaitReady(id, timeout_ms);
    if (!ready.ok()) {
      if (absl::IsNotFound(ready.status())) {
        throw RayException("PlacementGroup::Wait: placement group " + id.Hex() + " was removed or never created (" +
                           std::string(ready.status().message()) + ")");
      }
      ThrowStatus("PlacementGroup::Wait", ready.status());
    }
    return *ready;
  }

  std::optional<PlacementGroupInfo> GetPlacementGroupById(const std::string& group_id) override {
    manta::PlacementGroupID id = ParsePlacementGroupId(group_id);
    auto found = core_->placement_groups().Get(id);
    if (!found.ok()) ThrowStatus("ray::GetPlacementGroupById", found.status());
    if (!found->has_value()) return std::nullopt;
    return ToPlacementGroupInfo(**found);
  }

  std::optional<PlacementGroupInfo> GetPlacementGroupByName(const std::string& name) override {
    auto found = core_->placement_groups().GetNamed(name, "");
    if (!found.ok()) ThrowStatus("ray::GetPlacementGroup", found.status());
    if (!found->has_value()) return std::nullopt;
    return ToPlacementGroupInfo(**found);
  }

  std::vector<PlacementGroupInfo> GetAllPlacementGroups() override {
    auto all = core_->placement_groups().GetAll();
    if (!all.ok()) ThrowStatus("ray::GetAllPlacementGroups", all.status());
    std::vector<PlacementGroupInfo> out;
    out.reserve(all->size());
    for (const manta::rpc::PlacementGroupTableData& data : *all) out.push_back(ToPlacementGroupInfo(data));
    return out;
  }

  std::string CurrentActorId() override {
    manta::ActorID actor = core_->CurrentActorId();
    return actor.IsNil() ? std::string() : actor.Binary();
  }

  bool WasCurrentActorRestarted() override { return core_->WasCurrentActorRestarted(); }
  void Cancel(const std::string& object_id, bool force, bool recursive) override {
    absl::Status s = core_->CancelTask(ParseId(object_id), force, recursive);
    if (!s.ok()) ThrowStatus("ray::Cancel", s);
  }
  bool IsCancelled() override { return core_->IsCancelled(); }
  void NotifyWhenReady(const std::string& object_id, std::function<void()> ready) override {
    auto id = ObjectID::FromBinaryChecked(object_id);
    if (!id.ok()) return ready();  // Get says why
    core_->NotifyWhenReady(*id, std::move(ready));
  }

  bool StreamYield(SerializedValue item, std::function<void()> resume) override {
    auto go_on = core_->StreamYield(ToReturnValue(std::move(item)), std::move(resume));
    if (!go_on.ok()) ThrowStatus("co_yield", go_on.status());
    return *go_on;
  }
  StreamNextResult StreamNext(const std::string& end_id, int64_t timeout_ms) override {
    auto next = core_->StreamNext(ParseId(end_id), timeout_ms);
    if (!next.ok()) ThrowStatus("ObjectRefGenerator::Next", next.status());
    StreamNextResult out;
    if (next->kind == manta::core::StreamTable::Next::Kind::kEnd) return out;
    out.kind = StreamNextResult::Kind::kItem;
    out.id = next->id.Binary();
    return out;
  }
  void NotifyStreamNext(const std::string& end_id, std::function<void()> ready) override {
    auto id = ObjectID::FromBinaryChecked(end_id);
    if (!id.ok()) return ready();  // StreamNext says why
    core_->NotifyStreamNext(*id, std::move(ready));
  }

  void AddLocalReference(const std::string& id) override {
    auto parsed = ObjectID::FromBinaryChecked(id);
    if (parsed.ok()) core_->AddLocalReference(*parsed);
  }
  void RemoveLocalReference(const std::string& id) override {
    auto parsed = ObjectID::FromBinaryChecked(id);
    if (parsed.ok()) core_->RemoveLocalReference(*parsed);
  }
  std::string GetOwnerAddress(const std::string& id) override {
    auto parsed = ObjectID::FromBinaryChecked(id);
    return parsed.ok() ? core_->GetOwnerAddress(*parsed) : "";
  }
  void RegisterBorrowedRef(const std::string& id, const std::string& owner_address,
                           const std::string& outer_id) override {
    auto parsed = ObjectID::FromBinaryChecked(id);
    if (!parsed.ok()) return;
    std::optional<ObjectID> outer;
    if (auto o = ObjectID::FromBinaryChecked(outer_id); o.ok()) outer = *o;
    core_->RegisterBorrowedRef(*parsed, owner_address, outer);
  }
  bool IsLocalMode() const override { return false; }

 private:
  // Arguments as the core worker takes them; values over max_inline_arg_bytes are put
  // in the object store first and travel by reference (temporary puts, released once
  // the task holds them).
  struct Arguments {
    std::vector<manta::core::TaskArgInput> inputs;
    std::vector<ObjectID> temporary_puts;
    void ReleaseTemporaries(CoreWorker& core) {
      for (const ObjectID& put : temporary_puts) core.RemoveLocalReference(put);
      temporary_puts.clear();
    }
  };
  Arguments ConvertArguments(const std::string& function_name, std::vector<TaskArgument>& args) {
    Arguments out;
    out.inputs.resize(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      TaskArgument& arg = args[i];
      manta::core::TaskArgInput& in = out.inputs[i];
      if (arg.by_ref) {
        in.by_ref = true;
        in.ref = ParseId(arg.object_id);
      } else if (static_cast<int64_t>(arg.value.size) > max_inline_arg_bytes_) {
        auto id = core_->Put(arg.value.size, arg.value.write, ParseIds(arg.value.contained_ids));
        if (!id.ok()) {
          out.ReleaseTemporaries(*core_);
          ThrowStatus("storing argument " + std::to_string(i + 1) + " of " + function_name, id.status());
        }
        in.by_ref = true;
        in.ref = *id;
        out.temporary_puts.push_back(*id);
      } else {
        in.data.resize(arg.value.size);
        if (arg.value.size > 0) arg.value.write(in.data.data());
        in.nested_ids = ParseIds(arg.value.contained_ids);
      }
    }
    return out;
  }

  std::unique_ptr<CoreWorkerProcess> process_;
  CoreWorker* core_;  // process_'s
  std::unique_ptr<LocalCluster> cluster_;
  int64_t max_inline_arg_bytes_;
  const std::string runtime_env_;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

manta::Config LoadConfig() {
  auto config = manta::Config::FromEnvironment();
  if (!config.ok()) throw RayException("bad Manta configuration in the environment: " +
                                       std::string(config.status().message()));
  return *config;
}

// Loads the shared libraries of code_search_path (files, or every .so in a folder),
// so their RAY_REMOTE registrations run.
void LoadCodeSearchPath(const std::string& joined) {
  std::stringstream paths(joined);
  std::string path;
  while (std::getline(paths, path, ':')) {
    if (path.empty()) continue;
    std::vector<std::string> libs;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        if (entry.path().extension() == ".so") libs.push_back(entry.path().string());
      }
    } else {
      libs.push_back(path);
    }
    for (const std::string& lib : libs) {
      if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
        LOG(ERROR) << "code_search_path: cannot load " << lib << ": " << dlerror();
      }
    }
  }
}

// A worker's secrets (its raylet's tokens), taken from the pipe its raylet gave it.
std::map<std::string, std::string>& WorkerSecrets() {
  static auto* secrets = new std::map<std::string, std::string>();
  return *secrets;
}

// Runs when this library is loaded, before any code of the program (its static
// initializers, main): in a worker, the secrets pipe is read and closed here, so a
// child the program starts early cannot inherit it, and a bad pipe ends the worker
// with a message saying why.
__attribute__((constructor(101))) void TakeWorkerSecretsEarly() {
  const char* mode = std::getenv("MANTA_WORKER_MODE");
  if (mode == nullptr || std::string(mode) != "1") return;
  auto secrets = manta::TakeInheritedSecrets();
  if (!secrets.ok()) {
    std::fprintf(stderr, "manta worker: cannot start: its secrets pipe: %s\n",
                 std::string(secrets.status().message()).c_str());
    _exit(2);
  }
  WorkerSecrets() = std::move(*secrets);
}

// A worker runs task after task: what one frees (buffers of megabytes, under the
// mmap threshold) stays in the heap for the next instead of being given back and
// page-faulted in again. It goes back once the worker is idle (worker_idle_trim_ms).
void KeepFreedHeapForNextTasks(const manta::Config& config) {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(config.worker_malloc_mmap_threshold_bytes));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(config.worker_malloc_trim_threshold_bytes));
}

[[noreturn]] void RunWorker() {
  // A worker's stdout is its log file, which its raylet passes on to the driver: make
  // it line-buffered, as on a terminal, so that a task's printf or `std::cout << "...\n"`
  // shows as it is printed, not once 4 KiB have gathered or the worker exits.
  // (std::cout writes through stdout while it is synced with stdio, the default.)
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  manta::InitWorkerLogging(Env("MANTA_LOG_DIR"), "worker-" + Env("MANTA_WORKER_ID") + "-" + Env("MANTA_JOB_ID"));
  manta::core::CoreWorkerOptions options;
  options.is_driver = false;
  options.config = LoadConfig();
  KeepFreedHeapForNextTasks(options.config);
  auto job = manta::JobID::FromHex(Env("MANTA_JOB_ID"));
  auto worker = manta::WorkerID::FromHex(Env("MANTA_WORKER_ID"));
  if (!job.ok() || !worker.ok()) {
    LOG(ERROR) << "MANTA_WORKER_MODE is set but MANTA_JOB_ID / MANTA_WORKER_ID are missing or malformed";
    _exit(2);
  }
  options.job_id = *job;
  options.worker_id = *worker;
  // The raylet's tokens, taken before the program ran (TakeWorkerSecretsEarly).
  std::map<std::string, std::string>& secrets = WorkerSecrets();
  options.startup_token = secrets[manta::kWorkerStartupTokenEnv];
  options.credentials.token = secrets[manta::kClusterTokenEnv];
  secrets.clear();
  if (auto s = manta::rpc::LoadTls(manta::rpc::TlsFilesFromEnvironment(), &options.credentials); !s.ok()) {
    LOG(ERROR) << "worker " << worker->Hex() << " could not start: " << s;
    _exit(1);
  }
  options.node_ip_address = Env("MANTA_NODE_IP_ADDRESS").empty() ? "127.0.0.1" : Env("MANTA_NODE_IP_ADDRESS");
  options.bind_address = Env("MANTA_BIND_ADDRESS");
  options.raylet_address = Env("MANTA_RAYLET_ADDRESS");
  options.gcs_address = Env("MANTA_GCS_ADDRESS");
  options.job_config.set_ray_namespace(Env("MANTA_JOB_NAMESPACE"));
  options.job_config.set_default_actor_detached(Env("MANTA_DEFAULT_ACTOR_DETACHED") == "1");
  LoadCodeSearchPath(Env("MANTA_CODE_SEARCH_PATH"));
  auto process = CoreWorkerProcess::Start(options);
  if (!process.ok()) {
    LOG(ERROR) << "worker " << worker->Hex() << " could not start: " << process.status();
    _exit(1);
  }
  CoreWorker* raw = &(*process)->core();
  int64_t max_inline = options.config.max_inline_arg_bytes;
  // The env the raylet started this worker for: what its tasks' children inherit.
  InstallRayRuntime(
      std::make_unique<NativeRuntime>(std::move(*process), nullptr, max_inline, Env("MANTA_RUNTIME_ENV")));
  if (!raw->RunTaskExecutionLoop(ExecuteTask)) {
    // An actor's calls still run and use the core worker: leave without destroying it.
    google::FlushLogFiles(google::GLOG_INFO);
    std::fflush(nullptr);  // a last line printed without its newline
    _exit(0);
  }
  UninstallRayRuntime().reset();
  google::FlushLogFiles(google::GLOG_INFO);
  std::fflush(nullptr);
  _exit(0);
}

// Ray's flags whose values are secrets: workers need none of them.
constexpr const char* kSecretFlags[] = {"ray_redis_password"};

// `args` without the secret flags (`--flag=value`, `--flag value`, one dash too).
std::vector<std::string> WithoutSecretFlags(const std::vector<std::string>& args) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view name = args[i];
    const bool flag_like = name.rfind("-", 0) == 0;
    name.remove_prefix(name.rfind("--", 0) == 0 ? 2 : flag_like ? 1 : 0);
    const size_t eq = name.find('=');
    const bool secret = flag_like && std::any_of(std::begin(kSecretFlags), std::end(kSecretFlags),
                                    [&](const char* flag) { return name.substr(0, eq) == flag; });
    if (!secret) {
      kept.push_back(args[i]);
    } else if (eq == std::string_view::npos) {
      ++i;  // its value is the next argument
    }
  }
  return kept;
}

// The driver's command line, for workers started from the same binary (it is stored
// in the job table and shown by ps: the secret flags are left out).
std::vector<std::string> WorkerCommand(int argc, char** argv) {
  std::vector<std::string> args;
  if (argc > 0 && argv != nullptr) {
    // argv may end early (a NULL entry) when the program shortened it after main, as
    // GoogleTest does with its own flags while argc stays as it was.
    for (int i = 1; i < argc && argv[i] != nullptr; ++i) args.push_back(argv[i]);
  } else {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string arg;
    bool first = true;
    while (std::getline(in, arg, '\0')) {
      if (!first) args.push_back(arg);
      first = false;
    }
  }
  std::vector<std::string> command = {manta::SelfExecutablePath()};
  for (std::string& arg : WithoutSecretFlags(args)) command.push_back(std::move(arg));
  return command;
}

}  // namespace

manta::core::CoreWorker* GetCoreWorkerForTesting() {
  auto* native = dynamic_cast<NativeRuntime*>(GetRayRuntime());
  return native == nullptr ? nullptr : &native->core();
}

std::string GetClusterAddress() {
  manta::core::CoreWorker* core = GetCoreWorkerForTesting();
  return core == nullptr ? "" : core->gcs_address();
}

// The driver's TLS (src/common/cluster_tls.h): MANTA_TLS_* files, this machine's
// session of the cluster (`session_dir`, "" when none), or a certificate from its GCS
// when TLS is due.
void AddDriverTls(const std::string& address, const std::string& session_dir,
                  manta::core::CoreWorkerOptions* options) {
  auto mode = manta::ParseClusterTlsMode(options->config.cluster_tls);
  if (!mode.ok()) throw RayException("ray::Init: " + std::string(mode.status().message()));
  auto hp = manta::ParseHostPort(address);
  std::vector<std::string> names;
  if (!Env("MANTA_NODE_IP_ADDRESS").empty()) names.push_back(Env("MANTA_NODE_IP_ADDRESS"));
  auto s = manta::AddMemberTls(address, session_dir, *mode,
                               manta::MemberAddresses(hp.ok() ? hp->host : "", names),
                               options->config.enrollment_timeout_ms, &options->credentials);
  if (!s.ok()) throw RayException("ray::Init: " + std::string(s.message()));
}

std::unique_ptr<RayRuntime> CreateNativeRuntime(const ray::RayConfig& config, int argc, char** argv) {
  if (Env("MANTA_WORKER_MODE") == "1") RunWorker();
  // Debian's Abseil checks every Mutex acquisition for lock-order cycles: a global
  // lock and a graph update per Lock, which costs a driver about a quarter of its
  // task rate. It is switched off here, in ray::Init, unless the program asks to
  // keep it (MANTA_KEEP_MUTEX_DEADLOCK_DETECTION=1); a program may also set its own
  // mode after ray::Init returns.
  manta::DisableMutexDeadlockDetection();
  // A driver that crashes says where (as Ray's drivers do), unless it handles the
  // signal itself.
  manta::InstallCrashStackTraces();
  // A driver's own logging is the program's business: unless it set glog up, Manta
  // prints warnings and errors only (GLOG_minloglevel / GLOG_v still apply).
  if (!google::IsGoogleLoggingInitialized() && std::getenv("GLOG_minloglevel") == nullptr) {
    FLAGS_minloglevel = google::GLOG_WARNING;
  }
  manta::core::CoreWorkerOptions options;
  options.is_driver = true;
  options.config = LoadConfig();
  // Before any cluster is started: a job env no worker could apply fails Init.
  std::string job_runtime_env = JobRuntimeEnv(config);
  std::unique_ptr<LocalCluster> cluster;
  std::string address = config.address;
  std::string session_dir;  // this machine's session of the cluster, when there is one
  if (address.empty()) {
    std::vector<std::string> head_args = config.head_args;
    if (config.num_cpus >= 0) head_args.push_back("--num-cpus=" + std::to_string(config.num_cpus));
    if (config.num_gpus >= 0) head_args.push_back("--num-gpus=" + std::to_string(config.num_gpus));
    std::map<std::string, std::string> secrets;
    if (config.redis_password_) secrets[manta::kRedisPasswordEnv] = *config.redis_password_;
    if (!config.resources.empty()) {
      std::string json = "{";
      for (const auto& [name, quantity] : config.resources) {
        if (json.size() > 1) json += ",";
        json += "\"" + name + "\":" + std::to_string(quantity);
      }
      head_args.push_back("--resources=" + json + "}");
    }
    auto started = LocalCluster::Start(head_args, secrets);
    if (!started.ok()) throw RayException("ray::Init: " + std::string(started.status().message()));
    cluster = std::move(*started);
    address = cluster->address();
    options.credentials.token = cluster->token();
    session_dir = cluster->session_dir();
  } else {
    auto token = manta::FindClusterToken(address, "", manta::TempRoot(), &session_dir);
    if (!token.ok()) throw RayException("ray::Init: " + std::string(token.status().message()));
    options.credentials.token = std::move(*token);
  }
  AddDriverTls(address, session_dir, &options);
  options.gcs_address = address;
  // The driver is reached at the address of the raylet it joins unless told otherwise.
  options.node_ip_address = Env("MANTA_NODE_IP_ADDRESS");
  options.bind_address = Env("MANTA_BIND_ADDRESS");
  if (config.code_search_path.empty()) {
    for (const std::string& arg : WorkerCommand(argc, argv)) options.job_config.add_worker_command(arg);
  } else {
    // Absolute: a worker with a runtime env working_dir starts in another directory.
    for (const std::string& path : config.code_search_path) {
      std::error_code ec;
      std::filesystem::path absolute = std::filesystem::absolute(path, ec);
      options.job_config.add_code_search_path(ec ? path : absolute.string());
    }
  }
  // No namespace given: an anonymous one of this job only.
  options.job_config.set_ray_namespace(config.ray_namespace.empty()
                                           ? "anonymous_namespace_" + manta::WorkerID::FromRandom().Hex().substr(0, 32)
                                           : config.ray_namespace);
  options.job_config.set_default_actor_detached(config.default_actor_lifetime == ray::ActorLifetime::DETACHED);
  options.driver_entrypoint = manta::SelfExecutablePath();
  options.log_to_driver = config.log_to_driver;
  auto process = CoreWorkerProcess::Start(options);
  if (!process.ok()) {
    throw RayException("ray::Init: cannot connect to the cluster at " + address + ": " +
                       std::string(process.status().message()));
  }
  return std::make_unique<NativeRuntime>(std::move(*process), std::move(cluster), options.config.max_inline_arg_bytes,
                                         std::move(job_runtime_env));
}

}  // namespace internal
}  // namespace ray
