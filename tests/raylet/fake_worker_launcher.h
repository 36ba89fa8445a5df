// FakeWorkerLauncher: an in-process WorkerLauncherInterface for raylet unit tests.
//
// Records every start (argv, env, secrets, working directory, output files) and hands out increasing fake pids; a
// test can make the next start fail and answer Exit
// requests. Nothing is executed and no signal is sent. Loop thread only.
#pragma once

#include <signal.h>

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/common/event_loop.h"
#include "src/raylet/worker_launcher.h"

namespace manta::raylet {

class FakeWorkerLauncher : public WorkerLauncherInterface {
 public:
  struct StartRecord {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::map<std::string, std::string> secrets;
    std::string working_dir;
    WorkerOutputFiles output;
    pid_t pid = 0;
  };
  struct ExitRequest {
    rpc::Address address;
    std::function<void(const absl::Status&, bool)> callback;
  };

  explicit FakeWorkerLauncher(EventLoop& loop) : loop_(loop) {}

  absl::StatusOr<pid_t> Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                              const std::map<std::string, std::string>& secrets, const std::string& working_dir,
                              const WorkerOutputFiles& output) override {
    if (!fail_next_.ok()) {
      absl::Status s = fail_next_;
      fail_next_ = absl::OkStatus();
      return s;
    }
    pid_t pid = next_pid_++;
    starts.push_back({argv, env, secrets, working_dir, output, pid});
    return pid;
  }
  void Signal(pid_t pid, int signal) override {
    signals.emplace_back(pid, signal);
  }
  void AsyncRequestExit(const rpc::Address& address,
                        std::function<void(const absl::Status&, bool)> callback) override {
    exit_requests.push_back({address, std::move(callback)});
  }

  // The next Start fails with `status`.
  void FailNextStart(absl::Status status) { fail_next_ = std::move(status); }
  // Answers the oldest Exit request (its callback runs on the loop, as a real one would).
  void ReplyExit(absl::Status status, bool accepted) {
    ExitRequest request = std::move(exit_requests.front());
    exit_requests.pop_front();
    loop_.Post("FakeWorkerLauncher.ExitReply",
               [callback = std::move(request.callback), status, accepted] { callback(status, accepted); });
  }
  // Signals sent to `pid`.
  std::vector<int> SignalsTo(pid_t pid) const {
    std::vector<int> out;
    for (const auto& [p, s] : signals) {
      if (p == pid) out.push_back(s);
    }
    return out;
  }

  std::vector<StartRecord> starts;
  std::vector<std::pair<pid_t, int>> signals;
  std::deque<ExitRequest> exit_requests;

 private:
  EventLoop& loop_;
  absl::Status fail_next_ = absl::OkStatus();
  pid_t next_pid_ = 1000;
};

}  // namespace manta::raylet
