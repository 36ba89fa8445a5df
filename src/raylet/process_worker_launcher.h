// ProcessWorkerLauncher: the real WorkerLauncherInterface. Starts workers with
// manta::StartProcess (dying with the raylet), signals them with kill(2), and sends
// CoreWorkerService.Exit over gRPC. Loop thread only; StartProcess must run on the
// thread that lives as long as the raylet (the loop thread), because the kernel ties
// "die with the parent" to the forking thread.
#pragma once

#include "src/common/event_loop.h"
#include "src/common/rpc/grpc_client.h"
#include "src/raylet/worker_launcher.h"

namespace manta::raylet {

class ProcessWorkerLauncher : public WorkerLauncherInterface {
 public:
  // `client_options` are used for the Exit RPCs. `loop` outlives this.
  ProcessWorkerLauncher(EventLoop& loop, rpc::ClientOptions client_options)
      : loop_(loop), client_options_(std::move(client_options)) {}

  absl::StatusOr<pid_t> Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                              const std::map<std::string, std::string>& secrets,
                              const std::string& working_dir, const WorkerOutputFiles& output) override;
  void Signal(pid_t pid, int signal) override;
  void AsyncRequestExit(const rpc::Address& address,
                        std::function<void(const absl::Status&, bool accepted)> callback) override;

 private:
  EventLoop& loop_;
  rpc::ClientOptions client_options_;
};

}  // namespace manta::raylet
