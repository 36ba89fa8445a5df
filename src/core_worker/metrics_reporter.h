// MetricsReporter: sends what users record in this process (ray::Gauge, ray::Counter,
// ray::Histogram, ray::Sum; metrics::UserMetrics()) to the node's raylet, which
// exports it on its Prometheus endpoint (ARCHITECTURE.md §18). Every
// metrics_report_period_ms, and a last time at exit; each report is the process's
// whole cumulative state, so a lost one costs nothing. One in flight at a time; a
// process that records nothing sends nothing. Loop thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "protos/node_manager.grpc.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_client.h"

namespace manta::core {

class MetricsReporter {
 public:
  MetricsReporter(EventLoop& loop, const std::string& raylet_address, const WorkerID& worker_id,
                  const Config& config);
  ~MetricsReporter();

  // Stops the timer, sends the last report (marked final) and runs `done` once the
  // raylet answered or failed, or at once when nothing was ever recorded.
  void FinishAndFlush(std::function<void()> done);
  // Shutdown, after FinishAndFlush: a report still out (one sent before the last)
  // ends at once; its callback still runs on the loop. Any thread.
  void CancelAll() { raylet_.CancelAll(); }
  int64_t InFlight() const { return raylet_.InFlight(); }

 private:
  void Report(bool final, std::function<void()> done);

  EventLoop& loop_;
  const WorkerID worker_id_;
  rpc::GrpcClient<rpc::MetricsService> raylet_;
  std::unique_ptr<Timer> timer_;
  bool in_flight_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::core
