#include "src/raylet/process_worker_launcher.h"

#include <glog/logging.h>

#include <filesystem>

#include "protos/core_worker.grpc.pb.h"
#include "src/common/process.h"

namespace manta::raylet {

absl::StatusOr<pid_t> ProcessWorkerLauncher::Start(const std::vector<std::string>& argv,
                                                   const std::map<std::string, std::string>& env,
                                                   const std::map<std::string, std::string>& secrets,
                                                   const std::string& working_dir,
                                                   const WorkerOutputFiles& output) {
  for (const std::string* file : {&output.out, &output.err}) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::path(*file).parent_path();
    if (dir.empty()) continue;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError("cannot create the worker log directory " + dir.string() + ": " + ec.message());
  }
  ProcessOptions options;
  options.argv = argv;
  options.env = env;
  options.secrets = secrets;
  options.output_file = output.out;
  options.error_file = output.err;
  options.working_dir = working_dir;
  options.die_with_parent = true;
  return StartProcess(options);
}

void ProcessWorkerLauncher::Signal(pid_t pid, int signal) {
  if (absl::Status s = SignalProcess(pid, signal); !s.ok()) LOG(WARNING) << "signal to worker: " << s;
}


void ProcessWorkerLauncher::AsyncRequestExit(const rpc::Address& address,
                                             std::function<void(const absl::Status&, bool accepted)> callback) {
  // Rare (idle workers beyond the soft limit): a channel per call is fine. The call
  // keeps the client's shared state alive until it completes.
  rpc::ClientOptions options = client_options_;
  options.max_attempts = 1;
  rpc::GrpcClient<rpc::CoreWorkerService> client(loop_, address.ip_address() + ":" + std::to_string(address.port()),
                                                 options);
  rpc::ExitRequest request;
  request.set_force(false);
  client.Call(&rpc::CoreWorkerService::Stub::async::Exit, "CoreWorker.Exit", std::move(request),
              rpc::GrpcClient<rpc::CoreWorkerService>::Callback<rpc::ExitReply>(
                  [callback = std::move(callback)](const absl::Status& s, rpc::ExitReply&& reply) {
                    callback(s, s.ok() && reply.success());
                  }));
}

}  // namespace manta::raylet
