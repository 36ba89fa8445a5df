// ObjectManager: moves objects between nodes (ARCHITECTURE §9).
//
// Serving: ObjectManagerService.PullObject streams a local sealed object (restoring
// it from disk if it was spilled) in chunks, holding a store reference meanwhile.
// Pulling: Pull(id, locations) fetches from the first location that can serve it,
// writing each chunk straight into a local allocation on gRPC's thread (no extra
// copy through the loop), sealing at the end; on failure it tries the next location.
// Concurrent pulls of one object are merged. Streams in flight are capped so that
// (streams x chunk size) stays under max_bytes_in_flight; further pulls queue.
//
// Pulls from a node that serves the object data channel (object_data_channel.h; its
// port is the node's object_manager_port) go over it instead: without TLS one copy
// end to end instead of gRPC's three; with TLS sealed with AES-256-GCM. Those transfers run on
// `transfer_threads` threads of their own, which reach the store through the loop
// (object_manager_raw.cc). A node whose data channel refuses this one (its caps
// for strangers full, a handshake that fails) is pulled from over gRPC instead, and
// its data channel left alone for kDataRefusedMs.
//
// Public methods: loop thread; callbacks on the loop.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "protos/object_manager.grpc.pb.h"
#include "src/common/node_event_log.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/object_store/object_store.h"
#include "src/raylet/object_data_channel.h"

namespace manta::raylet {

struct ObjectManagerOptions {
  int64_t chunk_bytes = 4 << 20;
  int64_t max_bytes_in_flight = 256 << 20;
  int64_t pull_timeout_ms = 30000;
  int64_t max_message_bytes = 512 << 20;
  // The object data channel: off (gRPC only) when false.
  bool data_channel = true;
  int transfer_threads = 4;
  // The data channel's waits and caps (its io_timeout_ms is the pull timeout).
  ObjectDataLimits data_limits;
  // The arena's memfd, sent from with sendfile (-1: from memory).
  int arena_fd = -1;
  // Pulls are recorded here (the timeline's raylet tracks); may be null.
  NodeEventLog* events = nullptr;
  // The cluster token, proven in the data channel's handshake.
  std::string token;
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
  // A (new) node registered at `address`: it may be pulled from again, over its
  // object data channel at `data_port` when that is not `address`'s own port.
  void OnNodeAlive(const std::string& address, int data_port = 0);
  // Serves the object data channel on `ip`; returns its port. Not started, or with
  // data_channel off: pulls from here use gRPC.
  absl::StatusOr<int> StartDataChannel(const std::string& ip);
  // Stops serving and pulling over the data channel and joins its threads (before
  // the loop stops for good).
  void StopDataChannel();

  // The head's pull timeout, which arrives with the node's registration. Loop thread.
  void SetPullTimeout(int64_t ms) { pull_timeout_ms_ = ms; }

  grpc::Service* service();

  int64_t num_active_pulls() const { return active_streams_; }
  int64_t bytes_pulled_total() const { return bytes_pulled_; }
  int64_t bytes_served_total() const;

  // One pull of one object, across its candidate locations. Loop thread only, except
  // `dest`/`total`, which the active stream's reactor reads on gRPC's thread after the
  // loop set them (ordered by StartRead).
  struct PullState {
    ObjectID id;
    std::vector<std::string> locations;
    size_t next_location = 0;
    std::vector<PullCallback> callbacks;
    absl::Status last_error = absl::NotFoundError("no locations given");
    int64_t start_us = 0;  // when the first location was tried
    int64_t bytes = 0;     // once known
  };
  struct Impl;

 private:
  void Admit();
  void StartNextLocation(const std::shared_ptr<PullState>& pull);
  // A pull from `address` over gRPC streaming.
  void StartGrpcPull(const std::shared_ptr<PullState>& pull, const std::string& address);
  // object_manager_raw.cc: a pull over the object data channel at `data_address`.
  void StartDataPull(const std::shared_ptr<PullState>& pull, const std::string& address,
                     const std::string& data_address);
  // `refused`: the data channel refused this node (ObjectDataClient::Fetch).
  void OnDataPullDone(const std::shared_ptr<PullState>& pull, const std::string& address, int64_t stream_id,
                      object_store::ClientId client, int64_t total, const absl::Status& status, bool refused);
  // Runs `fn(done)` on the loop and waits (from another thread) for the value it
  // hands `done`; nullopt when the data channel stops or `timeout_ms` passes first.
  template <typename T>
  std::optional<T> WaitOnLoop(const char* name, std::function<void(std::function<void(T)>)> fn,
                              int64_t timeout_ms);
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
  // The object data channel: raylet address -> "ip:data port" of those serving it.
  absl::flat_hash_map<std::string, std::string> data_addresses_;
  // Raylets whose data channel refused this node, until when (MonotonicMs).
  static constexpr int64_t kDataRefusedMs = 10000;
  absl::flat_hash_map<std::string, int64_t> data_refused_until_;
  std::unique_ptr<ObjectDataServer> data_server_;
  std::unique_ptr<ObjectDataClient> data_client_;
  std::unique_ptr<TransferThreads> transfer_threads_;
  std::shared_ptr<std::atomic<bool>> data_stopping_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int64_t> next_data_serve_id_{0};
  // options_.pull_timeout_ms, until the head's config says otherwise (read by the
  // data channel's threads).
  std::atomic<int64_t> pull_timeout_ms_;
  std::deque<std::shared_ptr<PullState>> waiting_;
  int64_t active_streams_ = 0;
  int64_t bytes_pulled_ = 0;
  object_store::ClientId next_client_id_ = -1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace manta::raylet
