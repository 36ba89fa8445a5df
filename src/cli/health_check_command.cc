// `manta health-check`: a probe for supervisors (Kubernetes readiness and liveness,
// systemd, load balancers). Exit 0 when the GCS (or, with --node, this machine's
// raylet) answers within the deadline, 1 otherwise, with one line saying why. It
// asks nothing that changes cluster state: GetClusterId of the GCS, HealthCheck of
// the raylet.
//
// --node finds the raylet `manta start` started on this machine from its session
// directory (the newest one with a live raylet), with that session's token: a
// node's liveness must not depend on the GCS being up.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <iostream>

#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/cli/commands.h"
#include "src/cli/session.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/cluster_tls.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::cli {
namespace {

int Unhealthy(const std::string& why) {
  std::cerr << "manta health-check: unhealthy: " << why << std::endl;
  return 1;
}

std::chrono::system_clock::time_point Deadline(int64_t timeout_ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
}

// The newest session on this machine whose raylet still runs.
absl::StatusOr<std::string> LocalRayletSession() {
  std::vector<ProcessRecord> raylets;
  for (const ProcessRecord& r : ListRecords()) {
    if (r.role == Role::kRaylet && IsProcessAlive(r.pid) &&
        ProcessCommandLine(r.pid).find(r.exe_name) != std::string::npos) {
      raylets.push_back(r);
    }
  }
  if (raylets.empty()) {
    return absl::NotFoundError("no raylet started by `manta start` runs on this machine (under " + TempRoot() + ")");
  }
  // Session names begin with their start time in ms.
  auto newest = std::max_element(raylets.begin(), raylets.end(), [](const ProcessRecord& a, const ProcessRecord& b) {
    return a.session_dir < b.session_dir;
  });
  return newest->session_dir;
}

int CheckNode(int64_t timeout_ms) {
  auto session = LocalRayletSession();
  if (!session.ok()) return Unhealthy(std::string(session.status().message()));
  auto address = ReadFile(*session + "/raylet_address");
  if (!address.ok()) return Unhealthy("the session " + *session + " records no raylet address");
  std::string raylet = *address;
  while (!raylet.empty() && (raylet.back() == '\n' || raylet.back() == ' ')) raylet.pop_back();
  rpc::Credentials credentials;
  auto token = ReadTokenFile(*session + "/" + kClusterTokenFileName);
  if (!token.ok()) return Unhealthy(std::string(token.status().message()));
  credentials.token = *token;
  if (auto s = AddSessionTls(*session, &credentials); !s.ok()) return Unhealthy(std::string(s.message()));
  rpc::SetProcessCredentials(std::move(credentials));
  auto stub = rpc::NodeManagerService::NewStub(rpc::MakeChannel(raylet, 1 << 20));
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(Deadline(timeout_ms));
  rpc::HealthCheckReply reply;
  grpc::Status s = stub->HealthCheck(&ctx, rpc::HealthCheckRequest(), &reply);
  if (!s.ok()) return Unhealthy("the raylet at " + raylet + " did not answer: " + s.error_message());
  std::cout << "healthy: raylet at " << raylet << " (node " << Hex(reply.node_id()) << ")" << std::endl;
  return 0;
}

int CheckGcs(const ClusterFlags& flags, int64_t timeout_ms) {
  auto address = JoinCluster(flags);
  if (!address.ok()) return Unhealthy(std::string(address.status().message()));
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(*address, 1 << 20));
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(Deadline(timeout_ms));
  rpc::GetClusterIdReply reply;
  grpc::Status s = stub->GetClusterId(&ctx, rpc::GetClusterIdRequest(), &reply);
  if (!s.ok()) {
    return Unhealthy("the GCS at " + *address + " did not answer: " + s.error_message() +
                     (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  std::cout << "healthy: GCS at " << *address << " (cluster " << Hex(reply.cluster_id()) << ")" << std::endl;
  return 0;
}

}  // namespace

int RunHealthCheck(const ClusterFlags& flags, bool node, int64_t timeout_ms) {
  return node ? CheckNode(timeout_ms) : CheckGcs(flags, timeout_ms);
}

}  // namespace manta::cli
