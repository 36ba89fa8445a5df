// The autoscaler across hosts: the head (host 0, 1 CPU) runs `manta start --head
// --autoscaler` with the command provider. Its launch and terminate commands ask a
// small "cloud" for a machine, as a cloud CLI would: they drop a request in a shared
// folder and wait for the answer. The cloud is this test: it takes a free host of
// the test bed (hosts 1-2), copies the token there and runs `manta start --address
// <head> --node-type T --instance-id I` on it, or `manta stop` on the host of an
// instance to terminate. A driver on the head asks for 2-CPU tasks: two hosts come
// up and run them, then go once idle, and the hosts are free again.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "nlohmann/json.hpp"
#include "src/common/util.h"
#include "tests/multihost/multihost_cluster.h"
#include "tests/test_util/test_util.h"

namespace manta::testing {
namespace {

namespace fs = std::filesystem;

// Serves the launch and terminate requests the head's commands leave in `dir`.
class FakeCloud {
 public:
  FakeCloud(TestBed& bed, std::string dir, std::string gcs, std::string token)
      : bed_(bed), dir_(std::move(dir)), gcs_(std::move(gcs)), token_(std::move(token)) {
    for (int host = 1; host < bed_.num_hosts(); ++host) free_.push_back(host);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeCloud() {
    stop_ = true;
    thread_.join();
  }
  int launches() const { return launches_.load(); }
  int terminations() const { return terminations_.load(); }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  void Run() {
    while (!stop_) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("launch-", 0) == 0) Answer(name, Launch(ReadFile(entry.path().string()).value_or("")));
        if (name.rfind("terminate-", 0) == 0) Answer(name, Terminate(name.substr(10)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  void Answer(const std::string& request, bool ok) {
    std::error_code ec;
    fs::remove(dir_ + "/" + request, ec);
    (void)WriteFileAtomic(dir_ + "/done-" + request, ok ? "0\n" : "1\n");
  }
  void Note(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    log_ += line + "\n";
  }
  // `request`: "<instance id> <node type>".
  bool Launch(const std::string& request) {
    std::string id = request.substr(0, request.find(' '));
    std::string type = request.substr(request.find(' ') + 1);
    while (!type.empty() && type.back() == '\n') type.pop_back();
    if (free_.empty()) {
      Note("launch " + id + ": no free host");
      return false;
    }
    const int host = free_.front();
    free_.erase(free_.begin());
    CommandResult copied = bed_.Exec(host, {"sh", "-c", "umask 077 && cat > /tmp/cluster_token"}, {}, 10000, token_);
    CommandResult started = bed_.Exec(host,
                                      {MantaCli(), "start", "--address", gcs_, "--token-file", "/tmp/cluster_token",
                                       "--bind-address", bed_.Ip(host), "--num-cpus", "2", "--object-store-memory",
                                       "200000000", "--node-type", type, "--instance-id", id},
                                      {}, 60000);
    Note("launch " + id + " on host " + std::to_string(host) + ": " + started.output);
    if (copied.exit_code != 0 || started.exit_code != 0) {
      free_.push_back(host);
      return false;
    }
    host_of_[id] = host;
    ++launches_;
    return true;
  }
  bool Terminate(const std::string& id) {
    auto it = host_of_.find(id);
    if (it == host_of_.end()) return true;  // never became a machine
    CommandResult stopped = bed_.Exec(it->second, {MantaCli(), "stop"}, {}, 60000);
    Note("terminate " + id + " on host " + std::to_string(it->second) + ": " + stopped.output);
    free_.push_back(it->second);
    host_of_.erase(it);
    ++terminations_;
    return stopped.exit_code == 0;
  }

  TestBed& bed_;
  const std::string dir_, gcs_, token_;
  std::vector<int> free_;
  std::map<std::string, int> host_of_;
  std::atomic<int> launches_{0}, terminations_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string log_;
  std::thread thread_;
};

// The provider's commands: a request file, then the cloud's answer (bounded wait).
std::string RequestScript(const std::string& dir, const std::string& kind, const std::string& body) {
  return "set -e\nprintf '%s' \"" + body + "\" > \"" + dir + "/." + kind + "-$MANTA_INSTANCE_ID\"\n" +
         "mv \"" + dir + "/." + kind + "-$MANTA_INSTANCE_ID\" \"" + dir + "/" + kind + "-$MANTA_INSTANCE_ID\"\n" +
         "i=0\nwhile [ ! -f \"" + dir + "/done-" + kind + "-$MANTA_INSTANCE_ID\" ]; do\n" +
         "  i=$((i+1)); [ $i -lt 1200 ] || exit 1; sleep 0.1\ndone\n" +
         "exit \"$(cat \"" + dir + "/done-" + kind + "-$MANTA_INSTANCE_ID\")\"\n";
}

TEST(AutoscalerMultiHostTest, TasksBringHostsUpWhichGoOnceIdle) {
  auto bed = TestBed::Up(3);
  ASSERT_TRUE(bed.ok()) << bed.status();
  // Shared by the head's host and this test (under the build tree, outside /tmp).
  const std::string dir = std::string(MANTA_BUILD_DIR) + "/tests/multihost/cloud-" + (*bed)->id();
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic(dir + "/launch.sh", RequestScript(dir, "launch", "$MANTA_INSTANCE_ID $MANTA_NODE_TYPE"),
                              0755)
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/terminate.sh", RequestScript(dir, "terminate", ""), 0755).ok());
  nlohmann::json config = {
      {"available_node_types", {{"cpu2", {{"resources", {{"CPU", 2}}}, {"max_workers", 2}}}}},
      {"idle_timeout_minutes", 0.05},
      {"update_interval_s", 0.3},
      {"provider", {{"type", "command"}, {"launch", "sh " + dir + "/launch.sh"},
                    {"terminate", "sh " + dir + "/terminate.sh"}, {"timeout_s", 120}}}};
  ASSERT_TRUE(WriteFileAtomic(dir + "/autoscaler.json", config.dump(2)).ok());
  MultiHostOptions options;
  options.num_hosts = 1;  // the head only; the cloud has hosts 1 and 2
  options.cpus_per_host = 1;
  options.object_store_bytes = 200000000;
  options.head_start_args = {"--autoscaler", dir + "/autoscaler.json"};
  auto cluster = MultiHostCluster::StartOn(std::move(*bed), options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  MultiHostCluster& c = **cluster;
  {
    FakeCloud cloud(c.bed(), dir, c.gcs_address(), c.token());
    const std::string autoscale = std::string(MANTA_BUILD_DIR) + "/python_free_examples/autoscale";
    // 12 s of work for one host: the second has time to join even on a loaded machine.
    CommandResult driver = c.bed().Exec(0, {autoscale, "--tasks", "4", "--cpus", "2", "--seconds", "3"},
                                        {{"RAY_ADDRESS", c.gcs_address()}}, 180000);
    EXPECT_EQ(driver.exit_code, 0) << driver.output << cloud.log();
    EXPECT_NE(driver.output.find("4 tasks of 2 CPUs on 2 nodes"), std::string::npos) << driver.output;
    EXPECT_EQ(cloud.launches(), 2) << cloud.log();
    // Both hosts ran tasks: nodes at their own addresses, of the autoscaler's type.
    nlohmann::json status = c.Status();
    int typed = 0;
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      typed += n.value("node_type", "") == "cpu2" && n.value("state", "") == "ALIVE";
    }
    EXPECT_EQ(typed, 2) << status.dump(2);
    // Idle: drained and terminated through the cloud; their raylets leave the cluster.
    EXPECT_TRUE(WaitFor([&] { return cloud.terminations() == 2; }, 60000)) << cloud.log();
    EXPECT_TRUE(WaitFor(
        [&] {
          int alive = 0;
          for (const auto& n : c.Status().value("nodes", nlohmann::json::array())) {
            alive += n.value("state", "") == "ALIVE";
          }
          return alive == 1;
        },
        30000))
        << c.Status().dump(2);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace manta::testing
