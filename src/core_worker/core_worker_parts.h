// CoreWorkerParts: what a CoreWorker (core_worker.h) is handed by whoever builds it.
#pragma once

#include "src/common/event_loop.h"
#include "src/core_worker/reference_counter.h"
#include "src/core_worker/rpc_clients.h"
#include "src/task_channel/task_channel.h"

namespace manta::object_store {
class ObjectStoreClientInterface;
}
namespace manta::gcs {
class GcsServicesInterface;
}

namespace manta::core {

// What a CoreWorker is handed: its loop (run by someone else), its peers' clients,
// its node's object store and who it is. CoreWorkerProcess (core_worker_process.h)
// builds the real ones; unit tests hand fakes.
struct CoreWorkerParts {
  EventLoop& loop;
  gcs::GcsServicesInterface& gcs;
  RayletClientPool& raylets;
  CoreWorkerClientPool& workers;
  TaskChannelPool& channels;
  TaskChannelServer* channel_server;  // a worker's (null for a driver)
  object_store::ObjectStoreClientInterface& store;
  Address self;  // its node, and where its CoreWorkerService is served
};

}  // namespace manta::core
