// StoreServer: serves the object store protocol (protos/object_store.proto) on a
// Unix socket, on the raylet's loop (ARCHITECTURE §8).
//
// Each connection is one client. Frames are length-prefixed; a frame longer than
// kMaxFrameBytes, a frame that does not parse, or an unknown request closes that
// connection (and releases everything the client held); other clients are not
// affected. The Connect reply passes the arena's memfd (SCM_RIGHTS). Loop thread only.
//
// Only this user's processes may connect: the socket is 0600, and a peer whose uid
// (SO_PEERCRED) is not StoreServerOptions::allowed_uid is refused at once. A client
// must send Connect within connect_timeout_ms, naming itself (the raylet knows a
// driver is alive while its connection is open). A partial frame reserves no more
// memory than what has arrived.
// Running out of descriptors pauses accepting for a moment instead of spinning.
#pragma once

#include <unistd.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "src/common/event_loop.h"
#include "src/object_store/arena.h"
#include "src/object_store/object_store.h"

namespace manta::object_store {

// Longest Unix socket path + 1 (sockaddr_un::sun_path holds 108 bytes with its NUL).
inline constexpr size_t kMaxSocketPathBytes = 108;

struct StoreServerOptions {
  // The only uid whose processes are served (default: this process's).
  uid_t allowed_uid = geteuid();
  int64_t connect_timeout_ms = 10000;
  // Clients that have not sent Connect yet, at once; more are refused as they come.
  int64_t max_pending_connects = 64;
  // Called on the loop when a client has sent Connect, and when that client's
  // connection closes, with the name it connected as (StoreConnectRequest.name,
  // at most kMaxClientNameBytes). Not called once Stop() has begun. May be null.
  std::function<void(const std::string& name)> on_client_connected;
  std::function<void(const std::string& name)> on_client_closed;
};

class StoreServer {
 public:
  static constexpr uint32_t kMaxFrameBytes = 16 << 20;
  // A longer client name closes the connection.
  static constexpr size_t kMaxClientNameBytes = 256;

  StoreServer(EventLoop& loop, ObjectStore& store, const Arena& arena, std::string socket_path,
              StoreServerOptions options = {});
  ~StoreServer();

  // Binds and listens. Error when the path cannot be bound.
  absl::Status Start();
  void Stop();
  const std::string& socket_path() const { return socket_path_; }
  size_t num_clients() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::string socket_path_;
};

}  // namespace manta::object_store
