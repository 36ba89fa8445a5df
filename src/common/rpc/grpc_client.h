// GrpcClient<Service>: an asynchronous client whose callbacks run on an EventLoop.
//
// Every call has a deadline. Calls marked idempotent are retried on UNAVAILABLE and
// DEADLINE_EXCEEDED with exponential backoff, up to max_attempts. A FaultInjector
// can drop requests or replies, or delay requests, per RPC name (tests only).
// Call() is thread-safe; callbacks always run on the loop, never inline.
// The loop must outlive the client; calls in flight when the client is destroyed
// still complete (their callbacks run) because the shared state outlives it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <unordered_set>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/fault_injection.h"
#include "src/common/rpc/status_convert.h"

namespace manta::rpc {

struct ClientOptions {
  int64_t deadline_ms = 10000;
  int64_t max_attempts = 5;
  int64_t initial_backoff_ms = 50;
  int64_t max_backoff_ms = 2000;
  int64_t max_message_bytes = 512 * 1024 * 1024;
  // Shared by every client of a process; may be null.
  std::shared_ptr<FaultInjector> faults;
};

// The options of the config's grpc_client_* tunables, with `faults` (may be null).
ClientOptions ClientOptionsFromConfig(const Config& config, std::shared_ptr<FaultInjector> faults);

struct CallOptions {
  // Overrides ClientOptions::deadline_ms for this call when > 0.
  int64_t deadline_ms = 0;
  // Retry on transient errors. Only for calls that are safe to repeat.
  bool idempotent = false;
};

// Initializes gRPC for the rest of the process on first call (later calls do nothing).
// Without it gRPC shuts down whenever its last channel and server go (every
// ray::Shutdown) and starts again at the next ray::Init; gRPC 1.51 does not survive
// that cycle reliably (a shutdown finishing on its own thread while the next start
// runs aborted a driver: "ref_counted.h: assertion failed: prior > 0").
void KeepGrpcInitialized();

// Creates a channel with fast reconnects, keepalive pings and our message-size
// limits, using TLS when this process's credentials (src/common/rpc/auth.h) turn it on.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int64_t max_message_bytes);
// Puts this process's cluster token into a call's metadata. Every call needs it:
// GrpcClient does it for its calls; code using a stub directly calls this on each
// ClientContext. (Not an interceptor: gRPC 1.51 crashes running client interceptors
// on callback streams whose call fails.)
void AttachClusterToken(grpc::ClientContext* context);

// What GrpcClient<Service> shares across services and methods, compiled once
// (grpc_client.cc): deadlines, retries, faults, cancellation and the loop's
// callbacks. Only the stub call and the typed reply are per method (CallBase).
class GrpcClientCore {
 public:
  const std::string& address() const { return state_->address; }

  // Cancels every call in flight and fails later ones at once (CANCELLED); their
  // callbacks still run on the loop. For shutdown: cancel, let the loop drain the
  // callbacks (InFlight() reaches 0), then stop the loop. Thread-safe.
  void CancelAll();
  // Calls started and not yet finished (their callbacks not yet run).
  int64_t InFlight() const { return state_->in_flight.load(); }

 protected:
  // One call of some method.
  struct CallBase {
    virtual ~CallBase() = default;
    // Starts the RPC with `context`; `done` runs on a gRPC thread.
    virtual void Send(grpc::ClientContext* context, std::function<void(grpc::Status)> done) = 0;
    virtual void ClearReply() = 0;
    // Runs the caller's callback with the status and the reply.
    virtual void Deliver(const absl::Status& status) = 0;

    const char* name = "";
    CallOptions call_options;
    int attempt = 0;
    std::unique_ptr<grpc::ClientContext> context;
  };

  GrpcClientCore(EventLoop& loop, std::string address, ClientOptions options);
  const std::shared_ptr<grpc::Channel>& channel() const { return state_->channel; }
  // Counts the call in flight and makes its first attempt.
  void Start(std::shared_ptr<CallBase> call);

 private:
  struct State {
    State(EventLoop& l, std::string a, ClientOptions o);
    EventLoop& loop;
    std::string address;
    ClientOptions options;
    std::shared_ptr<grpc::Channel> channel;
    std::mutex mu;
    std::unordered_set<grpc::ClientContext*> contexts;  // guarded by mu
    bool cancelled = false;                             // guarded by mu
    std::atomic<int64_t> in_flight{0};
  };

  static void Attempt(std::shared_ptr<State> state, std::shared_ptr<CallBase> call);
  static void Send(std::shared_ptr<State> state, std::shared_ptr<CallBase> call, int64_t deadline_ms,
                   bool drop_reply);
  static void Finish(std::shared_ptr<State> state, std::shared_ptr<CallBase> call, const grpc::Status& status);

  std::shared_ptr<State> state_;
};

template <typename Service>
class GrpcClient : public GrpcClientCore {
 public:
  using Stub = typename Service::Stub;
  template <typename Request, typename Reply>
  using AsyncMethod = void (Stub::async::*)(grpc::ClientContext*, const Request*, Reply*,
                                            std::function<void(grpc::Status)>);
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;

  GrpcClient(EventLoop& loop, std::string address, ClientOptions options)
      : GrpcClientCore(loop, std::move(address), std::move(options)), stub_(Service::NewStub(channel())) {}

  // Sends `request` through `method` (e.g. &Svc::Stub::async::Foo) named `name`.
  template <typename Request, typename Reply>
  void Call(AsyncMethod<Request, Reply> method, const char* name, Request request,
            Callback<Reply> callback, CallOptions call_options = {}) {
    auto call = std::make_shared<TypedCall<Request, Reply>>();
    call->stub = stub_;
    call->method = method;
    call->name = name;
    call->request = std::move(request);
    call->callback = std::move(callback);
    call->call_options = call_options;
    Start(std::move(call));
  }

 private:
  template <typename Request, typename Reply>
  struct TypedCall final : CallBase {
    void Send(grpc::ClientContext* context, std::function<void(grpc::Status)> done) override {
      (stub->async()->*method)(context, &request, &reply, std::move(done));
    }
    void ClearReply() override { reply = Reply(); }
    void Deliver(const absl::Status& status) override { callback(status, std::move(reply)); }

    std::shared_ptr<Stub> stub;  // calls in flight keep it
    AsyncMethod<Request, Reply> method;
    Request request;
    Reply reply;
    Callback<Reply> callback;
  };

  std::shared_ptr<Stub> stub_;
};

}  // namespace manta::rpc
