#include <signal.h>

#include "nlohmann/json.hpp"
#include "src/autoscaler/node_provider.h"
#include "src/common/json.h"
#include "src/common/process.h"

namespace manta::autoscaler {

namespace {

class CommandProvider final : public NodeProvider {
 public:
  CommandProvider(ProviderConfig config, ClusterContact contact)
      : config_(std::move(config)), contact_(std::move(contact)) {}

  absl::Status Launch(const NodeTypeConfig& type, const std::string& instance_id) override {
    std::map<std::string, std::string> env = Env(type.name, instance_id);
    env["MANTA_NODE_RESOURCES"] = DumpJson(nlohmann::json(type.resources));
    env["MANTA_NODE_CONFIG"] = type.node_config_json.empty() ? "{}" : type.node_config_json;
    return Run("launch", config_.launch_command, env);
  }

  absl::Status Terminate(const std::string& node_type, const std::string& instance_id) override {
    return Run("terminate", config_.terminate_command, Env(node_type, instance_id));
  }

 private:
  std::map<std::string, std::string> Env(const std::string& node_type, const std::string& instance_id) const {
    return {{"MANTA_NODE_TYPE", node_type},
            {"MANTA_INSTANCE_ID", instance_id},
            {"MANTA_HEAD_ADDRESS", contact_.gcs_address},
            {"MANTA_CLUSTER_TOKEN_FILE", contact_.token_file}};
  }

  absl::Status Run(const std::string& what, const std::string& command, std::map<std::string, std::string> env) {
    ProcessOptions p;
    p.argv = {"/bin/sh", "-c", command};
    p.env = std::move(env);
    p.output_file = contact_.log_file;
    // Its own process group: a timeout kills whatever it started that is still
    // attached; the node it started must have left the group (manta start does).
    p.new_session = true;
    const std::string name = "the " + what + " command of " + p.env["MANTA_INSTANCE_ID"];
    auto pid = StartProcess(p);
    if (!pid.ok()) return absl::UnavailableError(name + " did not start: " + std::string(pid.status().message()));
    auto code = WaitForChildExit(*pid, config_.command_timeout_ms);
    if (!code.ok()) {
      kill(-*pid, SIGKILL);  // its process group
      (void)WaitForChildExit(*pid, 5000);
      return absl::DeadlineExceededError(name + " did not finish within " +
                                         std::to_string(config_.command_timeout_ms / 1000) + " s");
    }
    if (*code != 0) {
      return absl::UnavailableError(name + " exited with " + std::to_string(*code) + " (its output: " +
                                    contact_.log_file + ")");
    }
    return absl::OkStatus();
  }

  ProviderConfig config_;
  ClusterContact contact_;
};

}  // namespace

std::unique_ptr<NodeProvider> MakeCommandProvider(const ProviderConfig& config, const ClusterContact& contact) {
  return std::make_unique<CommandProvider>(config, contact);
}

}  // namespace manta::autoscaler
