// One call of the `manta` commands to a cluster's daemon (the GCS or a raylet): with
// the cluster token and a deadline.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>

#include "src/common/rpc/auth.h"

namespace manta::cli {

template <typename Stub, typename Request, typename Reply>
grpc::Status CallWithToken(Stub& stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Reply*),
                           const Request& request, Reply* reply, int64_t deadline_s) {
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  return (stub.*method)(&ctx, request, reply);
}

}  // namespace manta::cli
