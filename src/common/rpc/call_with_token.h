// One blocking call to a cluster's daemon (the GCS or a raylet) with the cluster token
// and a deadline: for the `manta` commands and the dashboard, which wait for each
// answer on a thread of their own.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>

#include "src/common/rpc/grpc_client.h"

namespace manta::rpc {

template <typename Stub, typename Request, typename Reply>
grpc::Status CallWithToken(Stub& stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Reply*),
                           const Request& request, Reply* reply, int64_t deadline_s) {
  grpc::ClientContext ctx;
  AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  return (stub.*method)(&ctx, request, reply);
}

}  // namespace manta::rpc
