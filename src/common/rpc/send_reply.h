// SendReply: how an RPC handler completes its call (see grpc_server.h).
//
// Kept in its own small header so that components with RPC handlers need not include
// gRPC (expensive to compile) just to name the callback type.
#pragma once

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

namespace manta::rpc {

// Completes one RPC with a status; the reply message must be filled before calling.
// Callable from any thread, exactly once.
using SendReply = absl::AnyInvocable<void(absl::Status) &&>;

}  // namespace manta::rpc
