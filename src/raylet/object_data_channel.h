// The object data channel: node-to-node object transfer over TCP, the fast path of
// ARCHITECTURE §9.
//
// gRPC streaming costs the receiver a second copy of every byte (kernel to gRPC's
// buffers, then into the store) and the sender one more (into the kernel). Here,
// without encryption, the sender hands the store's pages to the kernel with
// sendfile() from the arena's memfd, and the receiver reads from the socket straight
// into the new object's allocation: one copy in all, which on the test bed's bridge
// is what raw TCP does. With TLS (the cluster's default across hosts) every message
// and byte is sealed with AES-256-GCM under keys of the connection: the sender seals
// from the store's memory into a buffer, the receiver opens in a buffer that stays
// in cache and copies into the allocation.
//
// Wire format, on blocking sockets whose every read and write is bounded by a
// deadline:
//   handshake: the task channel's (task_channel_security.h) with the purpose "object
//   channel", each message a length byte and its body; the server takes the
//   worker's part and announces its protection ('encrypt' with TLS, else 'none'),
//   the client refuses one weaker than its own. Both prove the token without sending
//   it and agree on keys (X25519), all bound together by the MACs.
//   then, any number of times (the client reuses an idle connection):
//     client -> server   object id (28 bytes)
//     server -> client   u8 found (1/0, or 2: here but not readable now, ask
//                        again later); if found: u64le data_size, u64le
//                        metadata_size, then data_size + metadata_size bytes
//     client -> server   u8 1 once it has them all (the server holds the object
//                        until then: sendfile() sends the pages as they are when
//                        the bytes leave, not as they were when it was called)
//   Encrypting, each of these is one sealed frame (the task channel's frame format),
//   and the object's bytes are frames of up to kSealedChunkBytes.
// A peer that fails the handshake, sends anything else, or stalls past the deadline
// is disconnected (and named in the log, at most once a second); the server never
// crashes on its input. Strangers are kept small: a connection still in its
// handshake counts against caps of its own (per host, loopback included, and in
// all) and must finish it by an absolute deadline however it trickles its bytes, so
// a peer without the token delays nobody who has it. A transfer must finish within
// the I/O timeout plus its size at min_bytes_per_s, so a slow peer cannot hold a
// transfer thread for ever.
//
// Threading: ObjectDataServer runs an accept thread and one thread per connection,
// all joined by Stop(). ObjectDataClient::Fetch blocks its calling thread; Cancel()
// may be called from any thread. The object store is reached only through the
// callbacks, which post to the raylet's loop and wait.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/common/id.h"
#include "src/common/logging.h"
#include "src/task_channel/task_channel_security.h"

namespace manta::raylet {

// An object as the server sends it: where its bytes are in the arena (the memfd
// `arena_fd` of the server), and how to give back the reference held meanwhile.
struct ServedObject {
  int64_t offset = 0;
  int64_t data_size = 0;
  int64_t metadata_size = 0;
  std::function<void()> release;
  // The object is here but cannot be read now (spilled, and no room yet to restore
  // it; or still being written): the client is told so and may ask again; nothing
  // else is set.
  bool busy = false;
};

// How long the channel waits, and how many strangers it admits (config_def.h's
// object_manager_* and object_data_channel_* entries).
struct ObjectDataLimits {
  bool encrypt = false;                 // seal everything (the cluster runs TLS)
  int64_t io_timeout_ms = 30000;        // one read or write that moves nothing
  int64_t connect_timeout_ms = 3000;    // the client's connect
  int64_t handshake_timeout_ms = 5000;  // the whole handshake, either side
  int64_t max_unproven_per_host = 8;    // connections in their handshake from one host
  int64_t max_unproven = 32;            // ... from all hosts
  int64_t min_bytes_per_s = 16 << 20;   // a transfer's deadline: io timeout + size at this rate
};

// Plain bytes of an object per sealed frame.
inline constexpr size_t kSealedChunkBytes = 256 << 10;

// One end of a connection: its socket (closed with it), and when the channel
// encrypts, the sealing of each direction.
struct DataConnection {
  explicit DataConnection(int fd);
  ~DataConnection();
  DataConnection(const DataConnection&) = delete;
  DataConnection& operator=(const DataConnection&) = delete;
  bool sealed() const { return sealer != nullptr; }
  // Sends `body` as one message (a sealed frame of `kind` when encrypting).
  absl::Status Send(uint8_t kind, std::string_view body);
  // Reads one message of `n` bytes (of `kind`, when encrypting).
  absl::Status Read(uint8_t kind, size_t n, std::string* body);

  const int fd;
  std::unique_ptr<core::FrameSealer> sealer;
  std::unique_ptr<core::FrameOpener> opener;
  std::string buffer;  // a sealed message, going out or coming in
  // A sealed frame of object bytes (kSealedChunkBytes at most), allocated at first use.
  char* Chunk() {
    if (chunk.empty()) chunk.resize(kSealedChunkBytes + core::kSealedFrameOverheadBytes);
    return chunk.data();
  }
  std::vector<char> chunk;
};

class ObjectDataServer {
 public:
  // Finds a sealed local object and holds it (blocking: the raylet posts to its
  // loop and waits); nullopt when it is not here.
  using Source = std::function<std::optional<ServedObject>(const ObjectID& id)>;

  // Listens on `ip` at a free port. `arena_fd` is read with sendfile at the
  // offsets Source returns; `base` is the same memory mapped (used when sendfile
  // cannot be).
  static absl::StatusOr<std::unique_ptr<ObjectDataServer>> Listen(const std::string& ip, const std::string& token,
                                                                  int arena_fd, const uint8_t* base, Source source,
                                                                  const ObjectDataLimits& limits);
  ~ObjectDataServer();
  int port() const { return port_; }
  // Bytes of objects sent so far. Any thread.
  int64_t bytes_served() const { return bytes_served_.load(); }
  // Connections open now (each is closed after io_timeout_ms of silence).
  size_t num_connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_fds_.size();
  }
  // Closes the listener and every connection, and joins their threads.
  void Stop();

  // Connections open at once, in all and from one other host (loopback peers count
  // only towards the total: every local process shares that address), so that one
  // host cannot keep every other raylet out. A raylet opens at most
  // object_transfer_threads (4) to a peer. Connections still in their handshake
  // count against ObjectDataLimits' smaller caps as well.
  static constexpr int kMaxConnections = 128;
  static constexpr int kMaxConnectionsPerHost = 16;
  // Tests: count loopback peers per host like remote ones.
  void LimitLoopbackPeersForTesting() { limit_loopback_ = true; }

 private:
  ObjectDataServer(int listen_fd, int port, std::string token, int arena_fd, const uint8_t* base, Source source,
                   const ObjectDataLimits& limits);
  void AcceptLoop();
  // Whether a connection from `fd`'s peer fits the caps; why not in *why.
  // REQUIRES: mu_ held.
  bool AdmitLocked(int fd, std::string* why);
  // Both ends prove the token, by the handshake deadline; sets up `c`'s sealing.
  absl::Status Handshake(DataConnection& c);
  void Serve(int fd);
  // Joins the threads of finished connections. REQUIRES: mu_ held.
  void ReapLocked();
  // Sends one object; false when the connection is no good any more.
  bool SendObject(DataConnection& c, const ObjectID& id);
  // Its bytes: by sendfile, or sealed in chunks, by `deadline_ms`.
  absl::Status SendBytes(DataConnection& c, const ServedObject& object, int64_t deadline_ms);

  const int listen_fd_;
  const int port_;
  const std::string token_;
  const int arena_fd_;
  const uint8_t* const base_;
  const Source source_;
  const ObjectDataLimits limits_;
  LogRateLimiter refusals_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> bytes_served_{0};
  std::thread accept_thread_;
  std::mutex mu_;  // guards the three below
  // One thread per connection, by connection number; a finished one is joined by
  // the accept loop (or Stop).
  absl::flat_hash_map<int64_t, std::thread> threads_;
  std::vector<int64_t> finished_;
  // Connections being served.
  struct Peer {
    std::string host;  // for the caps on all connections: "" for a loopback peer
    std::string ip;    // for the caps on unproven ones (loopback included)
    bool proven = false;
  };
  absl::flat_hash_map<int, Peer> open_fds_;
  std::atomic<bool> limit_loopback_{false};
  int64_t next_connection_ = 0;
};

class ObjectDataClient {
 public:
  // Where to write an object of these sizes (an allocation in the local store), or
  // why not (e.g. ALREADY_EXISTS). Blocking: the raylet posts to its loop and waits.
  using Allocate = std::function<absl::StatusOr<uint8_t*>(int64_t data_size, int64_t metadata_size)>;

  // Connecting to a server gives up after limits.connect_timeout_ms (a host cut off
  // answers nothing at all), its handshake after limits.handshake_timeout_ms.
  ObjectDataClient(std::string token, const ObjectDataLimits& limits);
  ~ObjectDataClient();

  // One fetch: cancellable from any thread while it runs.
  class Fetch {
   public:
    void Cancel();
    bool cancelled() const { return cancelled_.load(); }
    // After Run failed: the channel itself could not be used (the server refused
    // the connection, closed it or failed the handshake before anything was asked),
    // though its host answered. Pulling over gRPC may still work.
    bool channel_refused() const { return channel_refused_.load(); }

   private:
    friend class ObjectDataClient;
    std::mutex mu_;
    int fd_ = -1;
    std::atomic<bool> cancelled_{false};
    std::atomic<bool> channel_refused_{false};
  };

  // Reads `id` from the server at `address` ("ip:port") into the place `allocate`
  // gives, on the calling thread; every read and write waits at most `io_timeout_ms`,
  // and the whole transfer at most that plus its size at limits.min_bytes_per_s.
  // NOT_FOUND when the server does not hold it; UNAVAILABLE when it cannot be
  // reached, the connection breaks or a deadline passes; CANCELLED after
  // fetch->Cancel(). On success every byte was written.
  absl::Status Run(const std::string& address, const ObjectID& id, int64_t io_timeout_ms, const Allocate& allocate,
                   const std::shared_ptr<Fetch>& fetch);

 private:
  using Connection = std::unique_ptr<DataConnection>;
  // An authenticated connection to `address`: an idle one (*reused set), or a new one.
  absl::StatusOr<Connection> Connect(const std::string& address, int64_t io_timeout_ms, bool* reused);
  // Connects and asks for `id`: *c is the connection (registered in `fetch`) once
  // there is an answer, null (and the error) when there is none.
  absl::Status ConnectAndAsk(const std::string& address, const ObjectID& id, int64_t io_timeout_ms,
                             const std::shared_ptr<Fetch>& fetch, Connection* c, uint64_t* data_size,
                             uint64_t* metadata_size);
  void ReturnIdle(const std::string& address, Connection c);
  // Asks for `id` on `c`: its sizes, NOT_FOUND (the connection is still good), or
  // another error (it is not).
  static absl::Status Ask(DataConnection& c, const ObjectID& id, uint64_t* data_size, uint64_t* metadata_size);

  // Reads `n` bytes into `p` by `deadline_ms`, no read waiting over `io_timeout_ms`.
  static absl::Status Receive(DataConnection& c, uint8_t* p, uint64_t n, int64_t io_timeout_ms, int64_t deadline_ms);

  const std::string token_;
  const ObjectDataLimits limits_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Connection>> idle_;
};

// A few threads that run blocking jobs (the data channel's pulls) in order of
// submission. Destruction drops the jobs not started and joins the threads.
class TransferThreads {
 public:
  explicit TransferThreads(int n) {
    for (int i = 0; i < std::max(1, n); ++i) threads_.emplace_back([this] { Work(); });
  }
  ~TransferThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void Run(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (stop_) return;  // queued jobs are dropped: their pulls are being abandoned
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace manta::raylet
