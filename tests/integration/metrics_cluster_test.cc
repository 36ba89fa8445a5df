// Prometheus metrics on a real cluster (ARCHITECTURE.md §18): each daemon's endpoint
// serves the text format; the GCS counts task attempts exactly (after N tasks, N
// FINISHED); drivers and actors record ray::Gauge, ray::Counter, ray::Histogram and
// ray::Sum (as Ray's metric example does) and the node's raylet exports their series;
// a real Prometheus server (Debian's) scrapes the cluster and answers queries through
// its HTTP API. This binary is its own worker.
#include <ray/api.h>
#include <ray/api/metric.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/common/http/http_get.h"
#include "src/common/id.h"
#include "src/common/process.h"
#include "src/common/util.h"

namespace metrics_cluster_test {
namespace {

using ::testing::HasSubstr;

int Square(int x) { return x * x; }
int Slow(int x) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return x;
}

// Records one of each kind with the tags of `where` ("driver" or "actor").
void RecordEach(const std::string& where, int rounds) {
  ray::Gauge gauge("app_queue_depth", "items waiting", "items", {"where", "shape"});
  ray::Counter counter("app.requests", "requests served", "requests", {"where"});
  ray::Histogram histogram("app_latency_ms", "request latency", "ms", {1, 10, 100}, {"where"});
  ray::Sum sum("app_balance", "money moved", "units", {"where"});
  for (int i = 1; i <= rounds; ++i) {
    gauge.Set(i, {{"where", where}, {"shape", "steady"}});
    counter.Inc(1, {{"where", where}});
    histogram.Observe(i * 5, {{"where", where}});
    sum.Record(i % 2 == 0 ? 10 : -3, {{"where", where}});
  }
}

class MetricActor {
 public:
  static MetricActor* Create() { return new MetricActor(); }
  int Record(int rounds) {
    RecordEach("actor", rounds);
    return rounds;
  }
};

RAY_REMOTE(Square, Slow, MetricActor::Create, &MetricActor::Record);

// The body of GET `path` from 127.0.0.1:`port` ("" when it cannot be had).
std::string HttpGet(int port, const std::string& path) {
  return manta::http::HttpGet("127.0.0.1", port, path, 10000, 64 << 20).value_or("");
}

// The value of the sample `name{labels}` exactly as written in `text`, or -1.
double SampleValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// Every line is a comment or a sample of the text format, and no value is negative
// where it may not be.
void ExpectWellFormed(const std::string& text) {
  static const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|-Inf|NaN)$)");
  std::istringstream in(text);
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << "not a sample line: " << line;
    if (line.rfind("ray_tasks{", 0) == 0) {
      EXPECT_EQ(line.find(" -"), std::string::npos) << line;
    }
    ++samples;
  }
  EXPECT_GT(samples, 0);
}

class MetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=4", "--system-config",
                         R"({"metrics_report_period_ms": 200, "task_events_report_ms": 200,)"
                         R"( "task_events_max_detailed_per_s": 100})"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  static int RayletPort() { return harness_->AliveNodes().at(0).metrics_export_port(); }
  static int GcsPort() { return harness_->Status()["gcs_metrics_export_port"].get<int>(); }
  // Scrapes `port` until `series` has `value` (at most 30 s); returns the last value.
  static double WaitForSample(int port, const std::string& series, double value) {
    double last = -1;
    manta::testing::WaitFor(
        [&] {
          last = SampleValue(HttpGet(port, "/metrics"), series);
          return last == value;
        },
        30000);
    return last;
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* MetricsTest::harness_ = nullptr;

TEST_F(MetricsTest, EveryDaemonServesTheTextFormat) {
  ASSERT_GT(RayletPort(), 0);
  ASSERT_GT(GcsPort(), 0);
  const std::string raylet = HttpGet(RayletPort(), "/metrics");
  ExpectWellFormed(raylet);
  EXPECT_THAT(raylet, HasSubstr("ray_resources{Name=\"CPU\",State=\"AVAILABLE\"}"));
  EXPECT_THAT(raylet, HasSubstr("ray_object_store_memory{Location=\"MMAP_SHM\"}"));
  EXPECT_THAT(raylet, HasSubstr("ray_scheduler_tasks{State=\"Running\"}"));
  EXPECT_THAT(raylet, HasSubstr("ray_io_context_event_loop_lag_ms{Name=\"raylet\"}"));
  const std::string gcs = HttpGet(GcsPort(), "/metrics");
  ExpectWellFormed(gcs);
  EXPECT_THAT(gcs, HasSubstr("ray_actors{State=\"ALIVE\"}"));
  EXPECT_THAT(gcs, HasSubstr("ray_grpc_server_req_finished_total{Method="));
  EXPECT_THAT(gcs, HasSubstr("manta_task_events_dropped_total{Stage=\"gcs\"} 0"));
  // Anything but GET /metrics is refused plainly.
  EXPECT_EQ(HttpGet(GcsPort(), "/nothing"), "");
}

TEST_F(MetricsTest, TaskCountsAreExact) {
  constexpr int kTasks = 2000;
  // In waves of 100, so that most end in the report they were submitted in.
  for (int wave = 0; wave < kTasks / 100; ++wave) {
    std::vector<ray::ObjectRef<int>> refs;
    for (int i = 0; i < 100; ++i) refs.push_back(ray::Task(Square).Remote(i));
    for (auto& r : refs) r.Get();
  }
  EXPECT_EQ(WaitForSample(GcsPort(), R"(ray_tasks{State="FINISHED",Name="Square"})", kTasks), kTasks);
  const std::string gcs = HttpGet(GcsPort(), "/metrics");
  // None is left running (a series that never had one is absent: -1).
  EXPECT_LE(SampleValue(gcs, R"(ray_tasks{State="RUNNING",Name="Square"})"), 0) << gcs;
  EXPECT_EQ(SampleValue(gcs, R"(ray_tasks{State="FAILED",Name="Square"})"), -1) << gcs;
  // Beyond 100 a second (the head's --system-config, which the driver took) the driver
  // sent most of them only counted (some went whole): the counts above are exact all
  // the same.
  const double summarized = SampleValue(gcs, R"(manta_task_events_dropped_total{Stage="summarized"})");
  EXPECT_GT(summarized, 0) << gcs;
  EXPECT_LT(summarized, kTasks) << gcs;
  ExpectWellFormed(gcs);
}

TEST_F(MetricsTest, TaskCountsStayExactWhenANodeDies) {
  harness_->StartNode({"--num-cpus=4"});
  std::string doomed_id;
  pid_t doomed_raylet = 0;
  for (const manta::rpc::NodeInfo& node : harness_->AliveNodes()) {
    if (!node.is_head_node()) {
      doomed_id = manta::BinaryHex(node.node_id());
      doomed_raylet = node.raylet_pid();
    }
  }
  ASSERT_GT(doomed_raylet, 0);
  constexpr int kTasks = 600;
  std::vector<ray::ObjectRef<int>> refs;
  for (int i = 0; i < kTasks; ++i) refs.push_back(ray::Task(Slow).Remote(i));
  // Once the second node runs some of them, it dies; its tasks run again elsewhere.
  auto on_doomed = [&] {
    auto r = harness_->Manta({"list", "tasks", "--format", "json", "--filter", "name=Slow", "--filter",
                              "node_id=" + doomed_id, "--address", harness_->gcs_address()},
                             {}, 30000);
    return r.exit_code == 0 && r.output.find("\"task_id\"") != std::string::npos;
  };
  ASSERT_TRUE(manta::testing::WaitFor(on_doomed, 30000)) << "no task ran on the second node";
  ASSERT_EQ(kill(doomed_raylet, SIGKILL), 0);
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(*refs[i].Get(), i);
  EXPECT_EQ(WaitForSample(GcsPort(), R"(ray_tasks{State="FINISHED",Name="Slow"})", kTasks), kTasks);
  // Every attempt ended: none counts as still running or waiting.
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        const std::string gcs = HttpGet(GcsPort(), "/metrics");
        for (const char* state : {"RUNNING", "SUBMITTED_TO_WORKER", "PENDING_NODE_ASSIGNMENT", "PENDING_ARGS_AVAIL"}) {
          if (SampleValue(gcs, std::string("ray_tasks{State=\"") + state + "\",Name=\"Slow\"}") > 0) return false;
        }
        return true;
      },
      30000))
      << HttpGet(GcsPort(), "/metrics");
  const std::string gcs = HttpGet(GcsPort(), "/metrics");
  ExpectWellFormed(gcs);
  std::cout << "attempts lost with the node: " << SampleValue(gcs, R"(ray_tasks{State="FAILED",Name="Slow"})")
            << std::endl;
}

TEST_F(MetricsTest, UserMetricsOfADriverAndAnActorAreExportedByTheNode) {
  auto actor = ray::Actor(MetricActor::Create).Remote();
  EXPECT_EQ(*actor.Task(&MetricActor::Record).Remote(4).Get(), 4);
  RecordEach("driver", 3);
  const int port = RayletPort();
  EXPECT_EQ(WaitForSample(port, R"(app_requests{where="actor"})", 4), 4);
  EXPECT_EQ(WaitForSample(port, R"(app_requests{where="driver"})", 3), 3);
  const std::string text = HttpGet(port, "/metrics");
  ExpectWellFormed(text);
  EXPECT_EQ(SampleValue(text, R"(app_queue_depth{where="actor",shape="steady"})"), 4) << text;
  EXPECT_EQ(SampleValue(text, R"(app_balance{where="driver"})"), 10 - 3 - 3) << text;
  // Observations 5, 10, 15, 20 in buckets <=1, <=10, <=100.
  EXPECT_EQ(SampleValue(text, R"(app_latency_ms_bucket{where="actor",le="10"})"), 2) << text;
  EXPECT_EQ(SampleValue(text, R"(app_latency_ms_bucket{where="actor",le="+Inf"})"), 4) << text;
  EXPECT_EQ(SampleValue(text, R"(app_latency_ms_sum{where="actor"})"), 50) << text;
  // The actor exits; its counts stay in the node's totals.
  actor.Kill();
  EXPECT_EQ(WaitForSample(port, R"(app_requests{where="actor"})", 4), 4);
  // A bad definition is a clear error.
  try {
    ray::Counter bad("9 lives", "", "", {"le"});
    ADD_FAILURE() << "an invalid metric name was accepted";
  } catch (const ray::internal::RayException& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("9 lives"));
  }
  EXPECT_THROW(ray::Gauge("app.requests", "now a gauge", "", {"where"}), ray::internal::RayException);
}

// Debian's prometheus scrapes both endpoints; its HTTP API answers a query.
class PrometheusServer {
 public:
  PrometheusServer(const std::vector<std::string>& targets) {
    auto port = manta::PickFreePort();
    if (!port.ok()) return;
    port_ = *port;
    std::ofstream config(dir_.path() + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
           << "  - job_name: manta\n    static_configs:\n      - targets: [";
    for (size_t i = 0; i < targets.size(); ++i) config << (i ? ", " : "") << "'" << targets[i] << "'";
    config << "]\n";
    config.close();
    manta::ProcessOptions p;
    p.argv = {manta::FindExecutable("prometheus"), "--config.file=" + dir_.path() + "/prometheus.yml",
              "--storage.tsdb.path=" + dir_.path() + "/data",
              "--web.listen-address=127.0.0.1:" + std::to_string(port_)};
    p.output_file = dir_.path() + "/prometheus.out";
    auto pid = manta::StartProcess(p);
    if (pid.ok()) pid_ = *pid;
  }
  ~PrometheusServer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      manta::WaitForExit(pid_, 10000);
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  manta::testing::TempDir dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

TEST_F(MetricsTest, APrometheusServerScrapesTheCluster) {
  ASSERT_FALSE(manta::FindExecutable("prometheus").empty())
      << "prometheus is not installed (scripts/install-deps --test)";
  constexpr int kTasks = 300;
  std::vector<ray::ObjectRef<int>> refs;
  for (int i = 0; i < kTasks; ++i) refs.push_back(ray::Task(Square).Remote(i));
  for (auto& r : refs) r.Get();
  RecordEach("driver", 3);
  PrometheusServer prometheus(
      {"127.0.0.1:" + std::to_string(GcsPort()), "127.0.0.1:" + std::to_string(RayletPort())});
  ASSERT_GT(prometheus.pid(), 0);
  ASSERT_TRUE(manta::testing::WaitFor([&] { return !HttpGet(prometheus.port(), "/-/ready").empty(); }, 60000));
  // Both targets are up and the query finds the finished tasks and the user counter.
  std::string answer;
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        answer = HttpGet(prometheus.port(), "/api/v1/query?query=sum(up)");
        return answer.find("\"2\"]") != std::string::npos;
      },
      60000))
      << answer;
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        answer = HttpGet(prometheus.port(),
                         "/api/v1/query?query=ray_tasks%7BState%3D%22FINISHED%22%2CName%3D%22Square%22%7D");
        return answer.find("\"success\"") != std::string::npos && answer.find("\"Square\"") != std::string::npos;
      },
      60000))
      << answer;
  EXPECT_THAT(answer, HasSubstr("\"State\":\"FINISHED\""));
  EXPECT_TRUE(manta::testing::WaitFor(
      [&] {
        answer = HttpGet(prometheus.port(), "/api/v1/query?query=app_requests%7Bwhere%3D%22driver%22%7D");
        return answer.find("\"driver\"") != std::string::npos;
      },
      60000))
      << answer;
}

}  // namespace
}  // namespace metrics_cluster_test
