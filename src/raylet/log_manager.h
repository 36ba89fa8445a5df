// LogManager: a node's log files (ARCHITECTURE.md §18) — the daemons' logs and each
// worker's output in the session's logs/ directory.
//
// It serves `manta logs` (LogService: list the files, read one from an offset or its
// last lines), and it streams what workers print to their drivers: every
// log_to_driver_ms it reads what each worker wrote since to its stdout (.out) and
// stderr (.err) files, cuts it into lines and sends them to the GCS, marked with
// their stream (which publishes them to the job's driver, who prints each on its own
// stream). A worker that
// prints faster than that is read at most log_to_driver_max_bytes per round; when it
// is more than 8 MiB behind, the lines between are skipped and a line says so. A
// driver about to exit asks for a round at once (FlushWorkerLogs); once its job's
// output was read to the end, a batch marked with the driver's id follows the lines.
//
// Bad input (a name with a directory in it, an unknown file, offsets out of range) is
// refused with a message naming it. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_client.h"
#include "src/raylet/worker_pool.h"

namespace manta::raylet {

struct LogManagerOptions {
  std::string log_dir;
  NodeID node_id;
  std::string node_ip;
  // 0: no streaming to drivers.
  int64_t stream_period_ms = 100;
  int64_t stream_max_bytes = 1 << 20;
};

class LogManager {
 public:
  using ListWorkers = std::function<std::vector<WorkerPool::WorkerRecord>()>;
  LogManager(EventLoop& loop, LogManagerOptions options, gcs::GcsClientInterface& gcs, ListWorkers list_workers);
  ~LogManager();

  void HandleListLogs(const rpc::ListLogsRequest& request, rpc::ListLogsReply* reply, rpc::SendReply send_reply);
  void HandleReadLog(const rpc::ReadLogRequest& request, rpc::ReadLogReply* reply, rpc::SendReply send_reply);
  absl::Status ReadLog(const rpc::ReadLogRequest& request, rpc::ReadLogReply* reply) const;
  // A streaming round now (or as the one in flight ends), with the driver's mark after
  // the lines the job's workers printed before (in later rounds, when they take more
  // than a round's bytes).
  void HandleFlushWorkerLogs(const rpc::FlushWorkerLogsRequest& request, rpc::FlushWorkerLogsReply* reply,
                             rpc::SendReply send_reply);

  // One streaming round (the timer's; tests call it).
  void StreamOnce();

 private:
  // Where a worker's output was read up to, and its unfinished last line.
  struct Tail {
    JobID job_id;
    int pid = 0;
    int64_t offset = 0;
    std::string partial;
    bool alive = true;
    bool drained = false;  // it exited and was read to its end
  };
  // A driver's request for a mark after its job's output (FlushWorkerLogs).
  struct Flush {
    JobID job_id;
    std::string id;
    int tries = 0;   // rounds the GCS did not take
    int rounds = 0;  // rounds that did not read its job's output to the end
  };
  static constexpr int kMaxFlushTries = 3;
  // A mark waits at most this many rounds (64 MiB of output at the default
  // log_to_driver_max_bytes), in case a file stays unreadable.
  static constexpr int kMaxFlushRounds = 64;
  // What one streaming round keeps while it reads the workers' files.
  struct Round {
    int64_t budget = 0;                      // bytes it may still read
    absl::flat_hash_set<JobID> flushing;     // jobs whose drivers wait for a mark
    absl::flat_hash_set<JobID> unfinished;   // jobs whose output was not read to its end
    absl::flat_hash_set<std::string> listed;  // the files of the workers listed
  };
  // Reads what `tail` has not read of `file` into `lines` (at most `budget` bytes);
  // whether it read to the file's end.
  bool ReadNew(const std::string& file, Tail& tail, int64_t* budget, std::vector<std::string>* lines);
  // Whether a worker of the job has written to its output files here.
  bool HasOutput(const JobID& job_id) const;
  // Adds a batch of the new lines of `w`'s stdout (or stderr: `is_err`) to `request`.
  void ReadWorkerFile(const WorkerPool::WorkerRecord& w, bool is_err, Round& round,
                      rpc::ReportWorkerLogsRequest* request);
  // One round's batches of every worker's new lines, in `request` (a last line
  // without its newline too, for a job whose driver asked for a mark); the jobs whose
  // output was not read to its end (the round's bytes ran out).
  absl::flat_hash_set<JobID> ReadWorkers(rpc::ReportWorkerLogsRequest* request);
  // The waiting marks of jobs read to their end, added to `request` after the lines;
  // the others wait for the next round.
  std::vector<Flush> AddMarks(const absl::flat_hash_set<JobID>& unfinished, rpc::ReportWorkerLogsRequest* request);

  EventLoop& loop_;
  const LogManagerOptions options_;
  gcs::GcsClientInterface& gcs_;
  ListWorkers list_workers_;
  // By the worker's output file (two a worker: stdout, stderr).
  absl::flat_hash_map<std::string, Tail> tails_;
  bool in_flight_ = false;
  // Drivers' marks for the next round's end.
  std::vector<Flush> flushes_;
  // Jobs whose workers' lines were passed on. A flush for any other job whose
  // workers' files here are empty needs no mark (FlushWorkerLogsReply.marks false).
  absl::flat_hash_set<JobID> jobs_with_output_;
  std::unique_ptr<Timer> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The LogService gRPC front: posts each call to the loop.
class LogGrpcService final : public rpc::LogService::CallbackService {
 public:
  LogGrpcService(EventLoop& loop, LogManager& logs) : loop_(loop), logs_(logs) {}
  grpc::ServerUnaryReactor* ListLogs(grpc::CallbackServerContext* c, const rpc::ListLogsRequest* q,
                                     rpc::ListLogsReply* r) override;
  grpc::ServerUnaryReactor* ReadLog(grpc::CallbackServerContext* c, const rpc::ReadLogRequest* q,
                                    rpc::ReadLogReply* r) override;
  grpc::ServerUnaryReactor* FlushWorkerLogs(grpc::CallbackServerContext* c, const rpc::FlushWorkerLogsRequest* q,
                                            rpc::FlushWorkerLogsReply* r) override;

 private:
  EventLoop& loop_;
  LogManager& logs_;
};

}  // namespace manta::raylet
