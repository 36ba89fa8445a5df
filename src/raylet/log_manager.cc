#include "src/raylet/log_manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/container/flat_hash_set.h"
#include "src/common/rpc/serve_on_loop.h"

namespace manta::raylet {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kDefaultReadBytes = 1 << 20;
constexpr int64_t kMaxReadBytes = 4 << 20;
constexpr int64_t kDefaultTailLines = 1000;
// A worker further behind than this has the lines between skipped.
constexpr int64_t kMaxBacklogBytes = 8 << 20;
// A line longer than this is passed on in pieces.
constexpr size_t kMaxLineBytes = 16 << 10;

int64_t ModifiedMs(const fs::path& path) {
  std::error_code ec;
  auto t = fs::last_write_time(path, ec);
  if (ec) return 0;
  auto since = std::chrono::file_clock::to_sys(t).time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(since).count();
}

// `n` bytes of `path` from `offset` (fewer at its end).
std::string ReadRange(const std::string& path, int64_t offset, int64_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in || n <= 0) return "";
  in.seekg(offset);
  std::string data(static_cast<size_t>(n), '\0');
  in.read(data.data(), n);
  data.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return data;
}

// Where the last `lines` lines of a file of `size` bytes start, looking back at most
// `max_bytes`.
int64_t TailStart(const std::string& path, int64_t size, int64_t lines, int64_t max_bytes) {
  const int64_t from = std::max<int64_t>(0, size - max_bytes);
  std::string data = ReadRange(path, from, size - from);
  int64_t newlines = 0;
  // A final newline ends the last line rather than starting an empty one.
  int64_t end = static_cast<int64_t>(data.size());
  if (end > 0 && data[end - 1] == '\n') --end;
  for (int64_t i = end - 1; i >= 0; --i) {
    if (data[i] == '\n' && ++newlines == lines) return from + i + 1;
  }
  return from;
}

}  // namespace

LogManager::LogManager(EventLoop& loop, LogManagerOptions options, gcs::GcsClientInterface& gcs,
                       ListWorkers list_workers)
    : loop_(loop), options_(std::move(options)), gcs_(gcs), list_workers_(std::move(list_workers)) {
  if (options_.stream_period_ms > 0) {
    timer_ = loop_.RunEvery("LogManager.Stream", options_.stream_period_ms, [this] { StreamOnce(); });
  }
}

LogManager::~LogManager() { *alive_ = false; }

void LogManager::HandleListLogs(const rpc::ListLogsRequest&, rpc::ListLogsReply* reply, rpc::SendReply send_reply) {
  // By file name: the worker, and whether the file is its stderr.
  absl::flat_hash_map<std::string, std::pair<WorkerPool::WorkerRecord, bool>> workers;
  for (WorkerPool::WorkerRecord& w : list_workers_()) {
    const std::string out = fs::path(w.output.out).filename().string();
    workers[fs::path(w.output.err).filename().string()] = {w, true};
    workers[out] = {std::move(w), false};
  }
  std::vector<rpc::LogFileInfo> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(options_.log_dir, ec)) {
    std::error_code file_ec;
    if (!e.is_regular_file(file_ec)) continue;
    rpc::LogFileInfo& f = files.emplace_back();
    f.set_name(e.path().filename().string());
    f.set_size_bytes(static_cast<int64_t>(e.file_size(file_ec)));
    f.set_modified_ms(ModifiedMs(e.path()));
    auto w = workers.find(f.name());
    if (w != workers.end()) {
      const auto& [worker, is_err] = w->second;
      f.set_worker_id(worker.worker_id.Binary());
      f.set_job_id(worker.job_id.Binary());
      f.set_pid(worker.pid);
      f.set_alive(worker.alive);
      f.set_is_err(is_err);
    }
  }
  if (ec) {
    return std::move(send_reply)(
        absl::InternalError("cannot list the log directory " + options_.log_dir + ": " + ec.message()));
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
  for (rpc::LogFileInfo& f : files) *reply->add_files() = std::move(f);
  reply->set_node_id(options_.node_id.Binary());
  reply->set_node_ip(options_.node_ip);
  std::move(send_reply)(absl::OkStatus());
}

void LogManager::HandleReadLog(const rpc::ReadLogRequest& request, rpc::ReadLogReply* reply,
                               rpc::SendReply send_reply) {
  std::move(send_reply)(ReadLog(request, reply));
}

absl::Status LogManager::ReadLog(const rpc::ReadLogRequest& request, rpc::ReadLogReply* reply) const {
  const std::string& name = request.name();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("'" + name + "' is not the name of a log file (manta logs lists them)");
  }
  if (request.max_bytes() < 0 || request.max_bytes() > kMaxReadBytes) {
    return absl::InvalidArgumentError("max_bytes " + std::to_string(request.max_bytes()) + " is out of range (1 to " +
                                      std::to_string(kMaxReadBytes) + ")");
  }
  if (request.offset() < -1) {
    return absl::InvalidArgumentError("offset " + std::to_string(request.offset()) + " is out of range");
  }
  const int64_t max_bytes = request.max_bytes() == 0 ? kDefaultReadBytes : request.max_bytes();
  const std::string path = options_.log_dir + "/" + name;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::NotFoundError("node " + options_.node_ip + " has no log file '" + name + "'");
  }
  const int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) return absl::InternalError("cannot read " + path + ": " + ec.message());
  int64_t offset = request.offset();
  if (offset == -1) {
    const int64_t lines = request.tail_lines() > 0 ? request.tail_lines() : kDefaultTailLines;
    offset = TailStart(path, size, lines, max_bytes);
  }
  offset = std::min(offset, size);  // a file that shrank: nothing new
  std::string data = ReadRange(path, offset, std::min(max_bytes, size - offset));
  reply->set_next_offset(offset + static_cast<int64_t>(data.size()));
  reply->set_size_bytes(size);
  reply->set_data(std::move(data));
  return absl::OkStatus();
}

bool LogManager::ReadNew(const std::string& file, Tail& tail, int64_t* budget, std::vector<std::string>* lines) {
  std::error_code ec;
  const int64_t size = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) return true;
  if (size < tail.offset) tail.offset = 0;  // truncated
  if (size - tail.offset > kMaxBacklogBytes) {
    lines->push_back("[manta: " + std::to_string(size - tail.offset) +
                     " bytes of this worker's output skipped: it printed faster than they could be passed on]");
    tail.offset = size;
    tail.partial.clear();
    return true;
  }
  const int64_t n = std::min(size - tail.offset, *budget);
  std::string data = n > 0 ? ReadRange(file, tail.offset, n) : std::string();
  tail.offset += static_cast<int64_t>(data.size());
  *budget -= static_cast<int64_t>(data.size());
  size_t start = 0;
  for (size_t nl = data.find('\n'); nl != std::string::npos; nl = data.find('\n', start)) {
    tail.partial.append(data, start, nl - start);
    lines->push_back(std::move(tail.partial));
    tail.partial.clear();
    start = nl + 1;
  }
  tail.partial.append(data, start, std::string::npos);
  // A very long line, or the last one of a worker that exited, goes as it is.
  if (tail.partial.size() > kMaxLineBytes || (!tail.alive && tail.offset >= size && !tail.partial.empty())) {
    lines->push_back(std::move(tail.partial));
    tail.partial.clear();
  }
  return tail.offset >= size;
}

void LogManager::ReadWorkerFile(const WorkerPool::WorkerRecord& w, bool is_err, Round& round,
                                rpc::ReportWorkerLogsRequest* request) {
  const std::string& file = is_err ? w.output.err : w.output.out;
  if (file.empty()) return;
  round.listed.insert(file);
  auto [it, added] = tails_.try_emplace(file);
  Tail& tail = it->second;
  if (added) {
    tail.job_id = w.job_id;
    tail.pid = w.pid;
  }
  if (tail.drained) return;
  tail.alive = w.alive;
  std::vector<std::string> lines;
  const bool read_all = ReadNew(file, tail, &round.budget, &lines);
  tail.drained = !tail.alive && read_all;
  if (!read_all) {
    round.unfinished.insert(tail.job_id);  // beyond this round's bytes: the job's mark waits
  } else if (round.flushing.contains(tail.job_id) && !tail.partial.empty()) {
    lines.push_back(std::move(tail.partial));  // its driver is leaving: a last line without its newline
    tail.partial.clear();
  }
  if (lines.empty()) return;
  jobs_with_output_.insert(w.job_id);
  rpc::WorkerLogBatch* batch = request->add_batches();
  batch->set_job_id(w.job_id.Binary());
  batch->set_worker_id(w.worker_id.Binary());
  batch->set_pid(w.pid);
  batch->set_node_ip(options_.node_ip);
  batch->set_is_err(is_err);
  for (std::string& line : lines) batch->add_lines(std::move(line));
}

bool LogManager::HasOutput(const JobID& job_id) const {
  for (const WorkerPool::WorkerRecord& w : list_workers_()) {
    if (w.job_id != job_id) continue;
    for (const std::string* file : {&w.output.out, &w.output.err}) {
      std::error_code ec;
      if (!file->empty() && fs::file_size(*file, ec) > 0 && !ec) return true;
    }
  }
  return false;
}

absl::flat_hash_set<JobID> LogManager::ReadWorkers(rpc::ReportWorkerLogsRequest* request) {
  Round round;
  round.budget = options_.stream_max_bytes;
  for (const Flush& f : flushes_) round.flushing.insert(f.job_id);
  for (const WorkerPool::WorkerRecord& w : list_workers_()) {
    ReadWorkerFile(w, /*is_err=*/false, round, request);
    ReadWorkerFile(w, /*is_err=*/true, round, request);
  }
  const absl::flat_hash_set<std::string>& listed = round.listed;
  // Workers no longer listed (beyond the pool's history) are forgotten.
  for (auto it = tails_.begin(); it != tails_.end();) {
    if (listed.contains(it->first)) {
      ++it;
    } else {
      tails_.erase(it++);
    }
  }
  return std::move(round.unfinished);
}

std::vector<LogManager::Flush> LogManager::AddMarks(const absl::flat_hash_set<JobID>& unfinished,
                                                    rpc::ReportWorkerLogsRequest* request) {
  std::vector<Flush> marked;
  std::vector<Flush> later;
  for (Flush& f : flushes_) {
    if (unfinished.contains(f.job_id) && ++f.rounds < kMaxFlushRounds) {
      later.push_back(std::move(f));
      continue;
    }
    rpc::WorkerLogBatch* mark = request->add_batches();
    mark->set_job_id(f.job_id.Binary());
    mark->set_node_ip(options_.node_ip);
    mark->set_flush_id(f.id);
    marked.push_back(std::move(f));
  }
  flushes_ = std::move(later);
  return marked;
}

void LogManager::StreamOnce() {
  if (in_flight_) return;
  rpc::ReportWorkerLogsRequest request;
  const absl::flat_hash_set<JobID> unfinished = ReadWorkers(&request);
  std::vector<Flush> marked = AddMarks(unfinished, &request);
  if (request.batches_size() == 0) return;
  in_flight_ = true;
  std::weak_ptr<bool> alive = alive_;
  gcs_.AsyncReportWorkerLogs(std::move(request), [this, alive, marked = std::move(marked)](
                                                     const absl::Status& s, rpc::ReportWorkerLogsReply&&) mutable {
    if (alive.expired()) return;
    in_flight_ = false;
    if (!s.ok()) {
      VLOG(1) << "the GCS did not take workers' output: " << s;
      // Its lines are lost, but its marks go again (a driver waits for them), a few times.
      for (Flush& f : marked) {
        if (++f.tries < kMaxFlushTries) flushes_.push_back(std::move(f));
      }
    }
    if (!flushes_.empty()) StreamOnce();  // a driver asked meanwhile, or the rest of a job's output
  });
}

void LogManager::HandleFlushWorkerLogs(const rpc::FlushWorkerLogsRequest& request, rpc::FlushWorkerLogsReply* reply,
                                       rpc::SendReply send_reply) {
  constexpr size_t kMaxFlushIdBytes = 256;
  constexpr size_t kMaxWaitingFlushes = 4096;
  auto job_id = JobID::FromBinaryChecked(request.job_id());
  if (!job_id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("FlushWorkerLogs: job_id is not a job id"));
  if (request.flush_id().empty() || request.flush_id().size() > kMaxFlushIdBytes) {
    return std::move(send_reply)(absl::InvalidArgumentError("FlushWorkerLogs: flush_id must have 1 to " +
                                                            std::to_string(kMaxFlushIdBytes) + " bytes"));
  }
  if (options_.stream_period_ms <= 0) return std::move(send_reply)(absl::OkStatus());  // no streaming, no mark
  // Nothing the job's workers printed here was passed on, and nothing is there to
  // pass: no line can be on its way, so the driver need not wait for a mark.
  if (!jobs_with_output_.contains(*job_id) && !HasOutput(*job_id)) return std::move(send_reply)(absl::OkStatus());
  if (flushes_.size() >= kMaxWaitingFlushes) {
    return std::move(send_reply)(absl::ResourceExhaustedError("FlushWorkerLogs: too many flushes waiting"));
  }
  flushes_.push_back(Flush{*job_id, request.flush_id()});
  reply->set_marks(true);
  std::move(send_reply)(absl::OkStatus());
  StreamOnce();  // returns at once while a round is in flight; its end runs another
}

MANTA_SERVE_ON_LOOP(LogGrpcService, "Log", ListLogs, logs_, LogManager)
MANTA_SERVE_ON_LOOP(LogGrpcService, "Log", ReadLog, logs_, LogManager)
MANTA_SERVE_ON_LOOP(LogGrpcService, "Log", FlushWorkerLogs, logs_, LogManager)

}  // namespace manta::raylet
