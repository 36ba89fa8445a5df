// ObjectManager: moves objects between nodes (ARCHITECTURE §9).
//
// Serving: ObjectManagerService.PullObject streams a local sealed object (restoring
// it from disk if it was spilled) in chunks, holding a store reference meanwhile.
// Pulling: Pull(id, locations) fetches from the first location that can serve it,
// writing each chunk straight into a local allocation on gRPC's thread (no extra
// copy through the loop), sealing at the end; on failure it tries the next location.
// Concurrent pulls of one object are merged. Streams in flight are capped so that
// (streams x chunk size) stays under max_bytes_in_flight; further pulls queue.
// Public methods: loop thread; callbacks on the loop.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "protos/object_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/object_store/object_store.h"

namespace manta::raylet {

struct ObjectManagerOptions {
  int64_t chunk_bytes = 4 << 20;
  int64_t max_bytes_in_flight = 256 << 20;
  int64_t pull_timeout_ms = 30000;
  int64_t max_message_bytes = 512 << 20;
};

class ObjectManager {
 public:
  using PullCallback = std::function<void(const absl::Status&)>;

  ObjectManager(EventLoop& loop, object_store::ObjectStore& store, ObjectManagerOptions options);
  ~ObjectManager();

  // Makes `id` local, pulling from `locations` ("host:port" of raylets) in order.
  // OK at once when already local. Errors name the object and the last failure.
  void Pull(const ObjectID& id, std::vector<std::string> locations, PullCallback callback);
  // The raylet at `address` was declared dead: streams from it are cancelled (it
  // may be cut off, not gone, and a stream would then wait for pull_timeout_ms),
  // and it is never pulled from again; those pulls go on to their next location.
  void OnNodeDead(const std::string& address);
  // A (new) node registered at `address`: it may be pulled from again.
  void OnNodeAlive(const std::string& address);

  grpc::Service* service();

  int64_t num_active_pulls() const { return active_streams_; }
  int64_t bytes_pulled_total() const { return bytes_pulled_; }
  int64_t bytes_served_total() const;

  struct PullState;
  struct Impl;

 private:
  void Admit();
  void StartNextLocation(const std::shared_ptr<PullState>& pull);
  void FinishPull(const std::shared_ptr<PullState>& pull, const absl::Status& status);

  EventLoop& loop_;
  object_store::ObjectStore& store_;
  ObjectManagerOptions options_;
  absl::flat_hash_map<ObjectID, std::shared_ptr<PullState>> pulls_;
  // Streams in flight: the raylet each reads from, and how to cancel it (any thread).
  struct Stream {
    std::string address;
    std::function<void()> cancel;
  };
  absl::flat_hash_map<int64_t, Stream> streams_;
  int64_t next_stream_id_ = 0;
  absl::flat_hash_set<std::string> dead_locations_;
  std::deque<std::shared_ptr<PullState>> waiting_;
  int64_t active_streams_ = 0;
  int64_t bytes_pulled_ = 0;
  object_store::ClientId next_client_id_ = -1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::raylet
