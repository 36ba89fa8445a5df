#include "tests/multihost/multihost_cluster.h"

#include <cctype>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace manta::testing {

std::string MantaCli() { return BinaryPath("manta"); }

nlohmann::json DriverResult(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("RESULT (\\{.*\\})"))) return nullptr;
  auto j = nlohmann::json::parse(m[1].str(), nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}
std::string MultiHostDriver() { return MANTA_MULTIHOST_DRIVER; }

absl::StatusOr<std::unique_ptr<MultiHostCluster>> MultiHostCluster::Start(const MultiHostOptions& options) {
  auto bed = TestBed::Up(options.num_hosts);
  if (!bed.ok()) return bed.status();
  return StartOn(std::move(*bed), options);
}

std::vector<std::string> MultiHostCluster::StartArgs(int host) const {
  std::vector<std::string> args = {MantaCli(), "start", "--bind-address", bed_->Ip(host), "--num-cpus",
                                   std::to_string(options_.cpus_per_host), "--object-store-memory",
                                   std::to_string(options_.object_store_bytes), "--resources",
                                   "{\"host" + std::to_string(host) + "\": 100" +
                                       (host > 0 ? ", \"worker_host\": 100}" : "}")};
  args.insert(args.end(), options_.extra_start_args.begin(), options_.extra_start_args.end());
  return args;
}

absl::StatusOr<std::unique_ptr<MultiHostCluster>> MultiHostCluster::StartOn(std::unique_ptr<TestBed> bed,
                                                                            const MultiHostOptions& options) {
  std::unique_ptr<MultiHostCluster> cluster(new MultiHostCluster());
  cluster->bed_ = std::move(bed);
  cluster->options_ = options;
  std::vector<std::string> head = cluster->StartArgs(0);
  head.insert(head.end(), {"--head", "--port", "0"});
  head.insert(head.end(), options.head_start_args.begin(), options.head_start_args.end());
  if (!options.system_config.empty()) head.insert(head.end(), {"--system-config", options.system_config});
  CommandResult started = cluster->bed_->Exec(0, head, options.env, 60000);
  std::smatch m;
  if (started.exit_code != 0 || !std::regex_search(started.output, m, std::regex("GCS address: +(\\S+)"))) {
    return absl::InternalError("manta start --head on host 0 failed:\n" + started.output);
  }
  cluster->gcs_address_ = m[1];
  std::smatch t;
  if (!std::regex_search(started.output, t, std::regex("Cluster token: +(\\S+)"))) {
    return absl::InternalError("manta start --head printed no token file:\n" + started.output);
  }
  CommandResult token = cluster->bed_->Exec(0, {"cat", t[1]});
  if (token.exit_code != 0) return absl::InternalError("cannot read the head's token: " + token.output);
  cluster->token_ = token.output;
  while (!cluster->token_.empty() && std::isspace(static_cast<unsigned char>(cluster->token_.back()))) {
    cluster->token_.pop_back();
  }
  for (int host = 1; host < options.num_hosts; ++host) {
    if (absl::Status s = cluster->StartNode(host); !s.ok()) return s;
  }
  return cluster;
}

absl::Status MultiHostCluster::StartNode(int host, const std::vector<std::string>& extra_args) {
  // As an administrator would copy it with scp: 0600, and not on any command line.
  CommandResult copied =
      bed_->Exec(host, {"sh", "-c", std::string("umask 077 && cat > ") + kTokenPath}, {}, 10000, token_);
  if (copied.exit_code != 0) return absl::InternalError("cannot copy the token to host " + std::to_string(host));
  std::vector<std::string> args = StartArgs(host);
  args.insert(args.end(), {"--address", gcs_address_, "--token-file", kTokenPath});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  CommandResult joined = bed_->Exec(host, args, options_.env, 60000);
  if (joined.exit_code != 0) {
    return absl::InternalError("manta start on host " + std::to_string(host) + " failed:\n" + joined.output);
  }
  return absl::OkStatus();
}

CommandResult MultiHostCluster::Manta(int host, const std::vector<std::string>& args, int64_t timeout_ms) {
  std::vector<std::string> argv = {MantaCli()};
  argv.insert(argv.end(), args.begin(), args.end());
  return bed_->Exec(host, argv, options_.env, timeout_ms);
}

nlohmann::json MultiHostCluster::Status(int host) {
  CommandResult r = Manta(host, {"status", "--json", "--address", gcs_address_}, 20000);
  if (r.exit_code != 0) return nlohmann::json::object();
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

std::string MultiHostCluster::NodeState(const std::string& ip, int64_t* end_time_ms) {
  nlohmann::json status = Status(0);
  if (!status.contains("nodes")) return "";
  std::string state;
  for (const auto& node : status["nodes"]) {
    std::string address = node.value("address", "");
    if (address.rfind(ip + ":", 0) != 0) continue;
    // A host restarted later has a new node at the same address: the alive one wins.
    if (state.empty() || node.value("state", "") == "ALIVE") {
      state = node.value("state", "");
      if (end_time_ms != nullptr) *end_time_ms = node.value("end_time_ms", int64_t{0});
    }
  }
  return state;
}

TestBed::Env MultiHostCluster::DriverEnv() const {
  TestBed::Env env = options_.env;
  env["RAY_ADDRESS"] = gcs_address_;
  return env;
}

namespace {

// The driver's command line; MANTA_TEST_DRIVER_WRAPPER (e.g. "gdb -batch -ex run
// -ex bt --args") goes in front of it, to debug a driver on its host.
std::vector<std::string> DriverCommand() {
  std::vector<std::string> argv;
  if (const char* wrapper = std::getenv("MANTA_TEST_DRIVER_WRAPPER"); wrapper != nullptr) {
    std::istringstream words(wrapper);
    std::string word;
    while (words >> word) argv.push_back(word);
  }
  argv.push_back(MultiHostDriver());
  return argv;
}

}  // namespace

CommandResult MultiHostCluster::Driver(int host, const std::vector<std::string>& args, int64_t timeout_ms,
                                       const TestBed::Env& env) {
  std::vector<std::string> argv = DriverCommand();
  argv.insert(argv.end(), args.begin(), args.end());
  TestBed::Env all = DriverEnv();
  all.insert(env.begin(), env.end());
  return bed_->Exec(host, argv, all, timeout_ms);
}

absl::StatusOr<TestBed::Process> MultiHostCluster::SpawnDriver(int host, const std::vector<std::string>& args) {
  std::vector<std::string> argv = DriverCommand();
  argv.insert(argv.end(), args.begin(), args.end());
  return bed_->Spawn(host, argv, DriverEnv());
}

}  // namespace manta::testing
