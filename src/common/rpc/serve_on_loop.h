// MANTA_SERVE_ON_LOOP: defines one method of a gRPC callback service as a call of a
// component's handler on the loop (ServeOnLoop + BindHandler, grpc_server.h), for
// the services whose methods all look alike. In a .cc file:
//
//   MANTA_SERVE_ON_LOOP(NodeInfoService, "NodeInfo", RegisterNode, nodes_, GcsNodeManager)
//
// defines NodeInfoService::RegisterNode(context, RegisterNodeRequest*, RegisterNodeReply*)
// to run nodes_.HandleRegisterNode on the service's loop_, logged and authenticated as
// "NodeInfo.RegisterNode". MANTA_SERVE_ON_LOOP_AS names the call and the handler
// itself: MANTA_SERVE_ON_LOOP_AS(KVService, InternalKVGet, "KV.Get", kv_, &GcsKVManager::HandleGet).
#pragma once

#include "src/common/rpc/grpc_server.h"

#define MANTA_SERVE_ON_LOOP(Service, prefix, Method, component, Component)                                   \
  grpc::ServerUnaryReactor* Service::Method(grpc::CallbackServerContext* c, const rpc::Method##Request* q,  \
                                            rpc::Method##Reply* r) {                                        \
    return ::manta::rpc::ServeOnLoop(loop_, prefix "." #Method, c, q, r,                                    \
                                     ::manta::rpc::BindHandler(component, &Component::Handle##Method));     \
  }

#define MANTA_SERVE_ON_LOOP_AS(Service, Method, name, component, handler)                                    \
  grpc::ServerUnaryReactor* Service::Method(grpc::CallbackServerContext* c, const rpc::Method##Request* q,  \
                                            rpc::Method##Reply* r) {                                        \
    return ::manta::rpc::ServeOnLoop(loop_, name, c, q, r, ::manta::rpc::BindHandler(component, handler));  \
  }
