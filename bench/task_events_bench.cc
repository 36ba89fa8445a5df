// What task events cost where they are kept (no daemons): recording an attempt's
// states in a core worker's buffer and taking a batch, merging batches in the GCS's
// task table, the table's memory for 1,000,000 attempts against its cap, and a
// filtered query over a full table; recording with submissions and ends on two
// threads (as a driver does); taking, sending and merging again at the default
// detail rate (short attempts beyond task_events_max_detailed_per_s counted, not
// sent). Baseline:
// an absl hash-table insert per attempt.
// The cost on the task path through a real cluster is task_bench / actor_bench run
// with MANTA_task_events_enabled=0 and =1.
//
// task_events_bench [--attempts N] [--runs R]; prints JSON.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench_util.h"
#include "src/common/config.h"
#include "src/common/logging.h"
#include "src/core_worker/task_event_buffer.h"
#include "src/gcs/gcs_task_manager.h"

namespace {

using manta::JobID;
using manta::TaskID;
using manta::bench::Clock;
using manta::bench::Since;

int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

const JobID kJob = JobID::FromInt(1);
const TaskID kDriver = TaskID::ForDriver(kJob);

manta::rpc::TaskSpec Spec(uint64_t i) {
  manta::rpc::TaskSpec spec;
  spec.set_type(manta::rpc::NORMAL_TASK);
  spec.set_task_id(TaskID::ForNormalTask(kJob, kDriver, i).Binary());
  spec.set_parent_task_id(kDriver.Binary());
  spec.set_function_name("Plus");
  auto* cpu = spec.add_required_resources();
  cpu->set_name("CPU");
  cpu->set_quantity(1);
  return spec;
}

// A core worker's buffer: ns per attempt for submit, dispatch, push and end, then
// for taking the batch and serializing it (as gRPC does, into a buffer reused, so
// that what this bench keeps costs no page faults there); returns the batches (to
// merge in the GCS).
// With `detail_per_s` > 0, the buffer counts the attempts beyond that rate instead of
// sending them (as core workers do by default).
std::vector<manta::rpc::TaskEventBatch> RecordAttempts(int64_t n, int64_t detail_per_s, double* record_ns,
                                                       double* take_ns, double* serialize_ns) {
  manta::core::TaskEventSource source;
  source.job_id = kJob;
  source.self = {manta::WorkerID::FromRandom(), manta::NodeID::FromRandom(), 1};
  manta::core::TaskEventBuffer buffer(source, 20000);
  buffer.SetDetailRate(detail_per_s, 500000);
  manta::core::TaskExecutorInfo worker{manta::WorkerID::FromRandom(), manta::NodeID::FromRandom(), 2};
  std::vector<manta::rpc::TaskEventBatch> batches;
  manta::rpc::TaskResult result;
  result.set_start_unix_us(manta::core::UnixMicros());
  result.set_run_us(3);
  double record = 0, take = 0, serialize = 0;
  std::string wire;
  for (int64_t done = 0; done < n;) {
    std::vector<manta::core::PackedTaskPtr> tasks;
    std::vector<manta::rpc::TaskSpec> specs;
    for (int i = 0; i < 20000 && done + i < n; ++i) specs.push_back(Spec(static_cast<uint64_t>(done + i + 1)));
    for (const auto& s : specs) tasks.push_back(manta::core::PackedTask::Pack(s));
    auto t0 = Clock::now();
    for (size_t i = 0; i < tasks.size(); ++i) {
      // As a core worker does with one task per push and per reply (the worst case).
      buffer.Dispatched(specs[i], *tasks[i], manta::core::UnixMicros());
      buffer.Reached(*tasks[i], manta::rpc::SUBMITTED_TO_WORKER);
      buffer.Ended(*tasks[i], result, worker, nullptr, manta::core::UnixMicros());
    }
    record += Since(t0);
    t0 = Clock::now();
    std::optional<manta::rpc::TaskEventBatch> batch = buffer.TakeBatch();
    take += Since(t0);
    t0 = Clock::now();
    batch->SerializeToString(&wire);
    serialize += Since(t0);
    batches.push_back(std::move(*batch));
    done += static_cast<int64_t>(tasks.size());
  }
  *record_ns = record * 1e9 / static_cast<double>(n);
  *take_ns = take * 1e9 / static_cast<double>(n);
  *serialize_ns = serialize * 1e9 / static_cast<double>(n);
  return batches;
}

// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// As a driver records: submissions on the program's thread, pushes and ends on the
// core worker's loop thread (another core), a little behind, in batches of 20,000
// taken between them. Returns the CPU ns per attempt of both threads together (the
// first stamps the attempt, the second stamps it and writes its row, reading what the
// first wrote on another core), to compare with RecordAttempts' figure, where one
// thread records everything.
double RecordAcrossThreads(int64_t n) {
  manta::core::TaskEventSource source;
  source.job_id = kJob;
  source.self = {manta::WorkerID::FromRandom(), manta::NodeID::FromRandom(), 1};
  manta::core::TaskEventBuffer buffer(source, 20000);
  manta::core::TaskExecutorInfo worker{manta::WorkerID::FromRandom(), manta::NodeID::FromRandom(), 2};
  manta::rpc::TaskResult result;
  result.set_start_unix_us(manta::core::UnixMicros());
  result.set_run_us(3);
  double cpu = 0;
  for (int64_t done = 0; done < n; done += 20000) {
    const int64_t m = std::min<int64_t>(20000, n - done);
    std::vector<manta::rpc::TaskSpec> specs;
    std::vector<manta::core::PackedTaskPtr> tasks;
    for (int64_t i = 0; i < m; ++i) {
      specs.push_back(Spec(static_cast<uint64_t>(done + i + 1)));
      tasks.push_back(manta::core::PackedTask::Pack(specs.back()));
    }
    std::atomic<int64_t> submitted{0};
    double ender_cpu = 0;
    std::thread ender([&] {
      double waiting = 0;  // the sleeps' system calls: not recording
      const double t0 = ThreadCpuSeconds();
      for (int64_t i = 0; i < m; ++i) {
        while (submitted.load(std::memory_order_acquire) <= std::min(i + 4096, m - 1)) {
          const double waited_from = ThreadCpuSeconds();
          std::this_thread::sleep_for(std::chrono::microseconds(50));
          waiting += ThreadCpuSeconds() - waited_from;
        }
        buffer.Reached(*tasks[i], manta::rpc::SUBMITTED_TO_WORKER);
        buffer.Ended(*tasks[i], result, worker, nullptr, manta::core::UnixMicros());
      }
      ender_cpu = ThreadCpuSeconds() - t0 - waiting;
    });
    const double t0 = ThreadCpuSeconds();
    for (int64_t i = 0; i < m; ++i) {
      buffer.Dispatched(specs[i], *tasks[i], manta::core::UnixMicros());
      if (i % 64 == 63 || i == m - 1) submitted.store(i + 1, std::memory_order_release);
    }
    cpu += ThreadCpuSeconds() - t0;
    ender.join();
    cpu += ender_cpu;
    (void)buffer.TakeBatch();
  }
  return cpu * 1e9 / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  manta::DisableMutexDeadlockDetection();  // as every Manta process does
  auto flags = manta::bench::BenchFlags::Parse(argc, argv);
  const int64_t attempts = std::stoll(flags.Value("--attempts", "1000000"));
  const int runs = std::stoi(flags.Value("--runs", "3"));
  std::vector<double> record, take, wire_out, wire_in, merge, baseline, query_ms, rss_capped_mb, rss_uncapped_per;
  std::vector<double> rated_record, rated_take, rated_wire_out, rated_merge, across_threads;
  double kept = 0, evicted = 0, accounted_mb = 0, rated_rows = 0;
  for (int run = 0; run < runs; ++run) {
    double r = 0, t = 0, w = 0;
    across_threads.push_back(RecordAcrossThreads(std::min<int64_t>(attempts, 200000)));
    {
      // At the default detail rate: most attempts are only counted.
      std::vector<manta::rpc::TaskEventBatch> batches =
          RecordAttempts(attempts, manta::Config().task_events_max_detailed_per_s, &r, &t, &w);
      rated_record.push_back(r);
      rated_take.push_back(t);
      rated_wire_out.push_back(w);
      manta::gcs::GcsTaskManager tasks({100000, int64_t{64} << 20});
      auto t0 = Clock::now();
      for (const auto& b : batches) (void)tasks.AddBatch(b);
      rated_merge.push_back(Since(t0) * 1e9 / static_cast<double>(attempts));
      rated_rows = 0;
      for (const auto& b : batches) rated_rows += static_cast<double>(manta::NumRows(b));
    }
    std::vector<manta::rpc::TaskEventBatch> batches = RecordAttempts(attempts, 0, &r, &t, &w);
    record.push_back(r);
    take.push_back(t);
    wire_out.push_back(w);
    {
      // What gRPC adds at the GCS: parsing each batch (into a message reused).
      std::vector<std::string> wire(batches.size());
      for (size_t i = 0; i < batches.size(); ++i) batches[i].SerializeToString(&wire[i]);
      manta::rpc::TaskEventBatch parsed;
      auto t0 = Clock::now();
      for (const std::string& bytes : wire) (void)parsed.ParseFromString(bytes);
      wire_in.push_back(Since(t0) * 1e9 / static_cast<double>(attempts));
    }
    {
      // The default caps: 100,000 attempts, 64 MiB.
      const int64_t before = ResidentBytes();
      manta::gcs::GcsTaskManager tasks({100000, int64_t{64} << 20});
      auto t0 = Clock::now();
      for (const auto& b : batches) (void)tasks.AddBatch(b);
      merge.push_back(Since(t0) * 1e9 / static_cast<double>(attempts));
      rss_capped_mb.push_back(static_cast<double>(ResidentBytes() - before) / 1e6);
      kept = static_cast<double>(tasks.num_attempts());
      evicted = static_cast<double>(tasks.evicted());
      accounted_mb = static_cast<double>(tasks.bytes()) / 1e6;
      // Ten running among the rest, found by a filter over the whole table.
      manta::rpc::TaskEventBatch running = batches.back();
      running.mutable_errors()->Clear();
      const int n = static_cast<int>(std::min<int64_t>(10, manta::NumRows(running)));
      running.mutable_rows()->resize(static_cast<size_t>(n) * sizeof(manta::TaskEventRow));
      for (int i = 0; i < n; ++i) {
        manta::TaskEventRow row = manta::RowAt(running, i);
        row.attempt = 7;  // new attempts of the same tasks
        row.state_us = {};
        row.state_us[manta::rpc::RUNNING - 1] = manta::core::UnixMicros();
        row.exec_end_us = 0;
        manta::SetRowAt(&running, i, row);
      }
      (void)tasks.AddBatch(running);
      manta::rpc::StateFilter f;
      f.set_key("state");
      f.set_predicate("=");
      f.set_value("RUNNING");
      t0 = Clock::now();
      auto listed = tasks.List({f}, 100, false);
      query_ms.push_back(Since(t0) * 1e3);
      if (!listed.ok() || listed->num_matched != n) {
        std::cerr << "the query found " << (listed.ok() ? listed->num_matched : -1) << " running, not " << n << "\n";
        return 1;
      }
    }
    {
      // Without a cap that binds: what an attempt really takes.
      const int64_t before = ResidentBytes();
      manta::gcs::GcsTaskManager tasks({attempts * 2, int64_t{1} << 40});
      for (const auto& b : batches) (void)tasks.AddBatch(b);
      rss_uncapped_per.push_back(static_cast<double>(ResidentBytes() - before) / static_cast<double>(attempts));
    }
    // Baseline: one hash-table insert per attempt.
    absl::flat_hash_map<TaskID, int64_t, manta::IdHash> table;
    auto t0 = Clock::now();
    for (int64_t i = 0; i < attempts; ++i) table[TaskID::ForNormalTask(kJob, kDriver, i)] = i;
    baseline.push_back(Since(t0) * 1e9 / static_cast<double>(attempts));
  }
  manta::bench::PrintJson({
      {"buffer_record_ns_per_attempt", Median(record)},
      {"buffer_record_across_threads_cpu_ns_per_attempt", Median(across_threads)},
      {"buffer_take_batch_ns_per_attempt", Median(take)},
      {"buffer_serialize_ns_per_attempt", Median(wire_out)},
      {"gcs_parse_ns_per_attempt", Median(wire_in)},
      {"gcs_merge_ns_per_attempt", Median(merge)},
      {"baseline_hash_insert_ns_per_attempt", Median(baseline)},
      {"gcs_attempts_kept_of_1m", kept},
      {"gcs_attempts_evicted_of_1m", evicted},
      {"gcs_accounted_mb_at_default_cap", accounted_mb},
      {"gcs_rss_growth_mb_at_default_cap", Median(rss_capped_mb)},
      {"gcs_cap_mb", 64 * 1.048576},
      {"gcs_rss_bytes_per_attempt_uncapped", Median(rss_uncapped_per)},
      {"query_running_among_full_table_ms", Median(query_ms)},
      {"rated_buffer_record_ns_per_attempt", Median(rated_record)},
      {"rated_buffer_take_batch_ns_per_attempt", Median(rated_take)},
      {"rated_buffer_serialize_ns_per_attempt", Median(rated_wire_out)},
      {"rated_gcs_merge_ns_per_attempt", Median(rated_merge)},
      {"rated_rows_sent", rated_rows},
  });
  return 0;
}
