// `manta timeline [--job ID] -o trace.json`: the cluster's task attempts as Chrome
// trace-event JSON (Perfetto, chrome://tracing). Each node is a process (integer pid,
// named by an "M" record), each worker or driver on it a thread (its OS pid as tid,
// named too); each execution is an "X" slice named by its function, and an arrow (an
// "s"/"f" flow pair) goes from where it was submitted to where it ran.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "nlohmann/json.hpp"
#include "protos/gcs.grpc.pb.h"
#include "src/cli/cluster_call.h"
#include "src/cli/commands.h"
#include "src/common/id.h"
#include "src/common/json.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/tls_relay.h"
#include "src/common/task_event_row.h"
#include "src/common/task_timeline.h"

namespace manta::cli {

namespace {

constexpr int64_t kMaxTimelineReplyBytes = 1 << 30;

absl::StatusOr<rpc::GetTaskTimelineReply> FetchTimeline(const std::string& address, const std::string& job_id) {
  auto stub = rpc::StateGcsService::NewStub(rpc::MakeChannel(address, kMaxTimelineReplyBytes));
  rpc::GetTaskTimelineRequest request;
  request.set_job_id(job_id);
  rpc::GetTaskTimelineReply reply;
  grpc::Status s = CallWithToken(*stub, &rpc::StateGcsService::Stub::GetTaskTimeline, request, &reply, 60);
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return absl::InvalidArgumentError(s.error_message());
  if (!s.ok()) {
    return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                  (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  return reply;
}

}  // namespace

int RunTimeline(const ClusterFlags& flags, const std::string& job_hex, const std::string& output) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "manta timeline: " << s.message() << std::endl;
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  };
  std::string job_id;
  if (!job_hex.empty()) {
    auto job = JobID::FromHex(job_hex);
    if (!job.ok()) return fail(absl::InvalidArgumentError("'" + job_hex + "' is not a job id: expected 8 hex digits"));
    job_id = job->Binary();
  }
  auto address = JoinCluster(flags);
  if (!address.ok()) return fail(address.status());
  auto reply = FetchTimeline(*address, job_id);
  if (!reply.ok()) return fail(reply.status());
  std::vector<std::string> warnings;
  const std::vector<rpc::GetNodeEventsReply> nodes = FetchNodeEvents(*address, &warnings);
  size_t node_events = 0;
  for (const rpc::GetNodeEventsReply& n : nodes) node_events += static_cast<size_t>(n.events_size());
  const std::string text = DumpJson(TaskTimelineTrace(reply->attempts(), nodes));
  std::ofstream out(output, std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) {
    return fail(absl::UnavailableError("cannot write " + output));
  }
  std::cout << "wrote " << NumRows(reply->attempts()) << " task attempts and " << node_events
            << " object transfers and spills to " << output
            << " (open it in https://ui.perfetto.dev or chrome://tracing)" << std::endl;
  for (const std::string& w : warnings) std::cerr << "(incomplete: " << w << ")" << std::endl;
  if (reply->num_dropped() > 0) {
    std::cerr << "(" << reply->num_dropped() << " task attempts were dropped by the cluster's caps and are missing)"
              << std::endl;
  }
  return 0;
}

}  // namespace manta::cli
