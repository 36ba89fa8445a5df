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

template <typename Service>
class GrpcClient {
 public:
  using Stub = typename Service::Stub;
  template <typename Request, typename Reply>
  using AsyncMethod = void (Stub::async::*)(grpc::ClientContext*, const Request*, Reply*,
                                            std::function<void(grpc::Status)>);
  template <typename Reply>
  using Callback = std::function<void(const absl::Status&, Reply&&)>;

  GrpcClient(EventLoop& loop, std::string address, ClientOptions options)
      : state_(std::make_shared<State>(loop, std::move(address), std::move(options))) {}

  const std::string& address() const { return state_->address; }

  // Cancels every call in flight and fails later ones at once (CANCELLED); their
  // callbacks still run on the loop. For shutdown: cancel, let the loop drain the
  // callbacks (InFlight() reaches 0), then stop the loop. Thread-safe.
  void CancelAll() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->cancelled = true;
    for (grpc::ClientContext* context : state_->contexts) context->TryCancel();
  }
  // Calls started and not yet finished (their callbacks not yet run).
  int64_t InFlight() const { return state_->in_flight.load(); }

  // Sends `request` through `method` (e.g. &Svc::Stub::async::Foo) named `name`.
  template <typename Request, typename Reply>
  void Call(AsyncMethod<Request, Reply> method, const char* name, Request request,
            Callback<Reply> callback, CallOptions call_options = {}) {
    state_->in_flight.fetch_add(1);
    auto call = std::make_shared<PendingCall<Request, Reply>>();
    call->method = method;
    call->name = name;
    call->request = std::move(request);
    call->callback = std::move(callback);
    call->call_options = call_options;
    Attempt(state_, call);
  }

 private:
  struct State {
    State(EventLoop& l, std::string a, ClientOptions o)
        : loop(l), address(std::move(a)), options(std::move(o)),
          channel(MakeChannel(address, options.max_message_bytes)), stub(Service::NewStub(channel)) {}
    EventLoop& loop;
    std::string address;
    ClientOptions options;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<Stub> stub;
    std::mutex mu;
    std::unordered_set<grpc::ClientContext*> contexts;  // guarded by mu
    bool cancelled = false;                             // guarded by mu
    std::atomic<int64_t> in_flight{0};
  };

  template <typename Request, typename Reply>
  struct PendingCall {
    AsyncMethod<Request, Reply> method;
    const char* name;
    Request request;
    Callback<Reply> callback;
    CallOptions call_options;
    int attempt = 0;
    std::unique_ptr<grpc::ClientContext> context;
    Reply reply;
  };

  static bool Retryable(const grpc::Status& s) {
    return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  }

  template <typename Request, typename Reply>
  static void Attempt(std::shared_ptr<State> state, std::shared_ptr<PendingCall<Request, Reply>> call) {
    ++call->attempt;
    int64_t deadline_ms =
        call->call_options.deadline_ms > 0 ? call->call_options.deadline_ms : state->options.deadline_ms;
    FaultDecision fault;
    if (state->options.faults) fault = state->options.faults->Decide(call->name);
    if (fault.kind == FaultKind::kDropRequest) {
      state->loop.PostAfter(call->name, deadline_ms, [state, call] {
        Finish(state, call, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                         std::string("injected fault: request of ") + call->name + " dropped"));
      });
      return;
    }
    auto send = [state, call, deadline_ms, drop_reply = fault.kind == FaultKind::kDropReply] {
      call->context = std::make_unique<grpc::ClientContext>();
      AttachClusterToken(call->context.get());
      call->context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
      call->reply = Reply();
      {
        std::lock_guard<std::mutex> lock(state->mu);
        if (state->cancelled) {
          state->loop.Post(call->name, [state, call] {
            Finish(state, call, grpc::Status(grpc::StatusCode::CANCELLED, "the client is shutting down"));
          });
          return;
        }
        state->contexts.insert(call->context.get());
      }
      (state->stub->async()->*(call->method))(
          call->context.get(), &call->request, &call->reply, [state, call, drop_reply](grpc::Status s) {
            {
              std::lock_guard<std::mutex> lock(state->mu);
              state->contexts.erase(call->context.get());
            }
            if (drop_reply && s.ok()) {
              s = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                               std::string("injected fault: reply of ") + call->name + " dropped");
              call->reply = Reply();  // discarded: the caller must not see its contents
            }
            state->loop.Post(call->name, [state, call, s] { Finish(state, call, s); });
          });
    };
    if (fault.kind == FaultKind::kDelay) {
      state->loop.PostAfter(call->name, fault.delay_ms, std::move(send));
    } else {
      send();
    }
  }

  template <typename Request, typename Reply>
  static void Finish(std::shared_ptr<State> state, std::shared_ptr<PendingCall<Request, Reply>> call,
                     const grpc::Status& status) {
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      cancelled = state->cancelled;
    }
    if (!status.ok() && !cancelled && call->call_options.idempotent && Retryable(status) &&
        call->attempt < state->options.max_attempts) {
      int64_t backoff = state->options.initial_backoff_ms;
      for (int i = 1; i < call->attempt && backoff < state->options.max_backoff_ms; ++i) backoff *= 2;
      backoff = std::min(backoff, state->options.max_backoff_ms);
      state->loop.PostAfter(call->name, backoff, [state, call] { Attempt(state, call); });
      return;
    }
    absl::Status result = FromGrpcStatus(status);
    if (!result.ok()) {
      result = absl::Status(result.code(), std::string(call->name) + " to " + state->address + ": " +
                                               std::string(result.message()));
    }
    call->callback(result, std::move(call->reply));
    state->in_flight.fetch_sub(1);
  }

  std::shared_ptr<State> state_;
};

}  // namespace manta::rpc
