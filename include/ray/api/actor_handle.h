// ray::ActorHandle<T>: a reference to an actor (an instance of T living in a worker
// of the cluster), returned by ray::Actor(factory).Remote(...) and ray::GetActor<T>.
//
//   ray::ActorHandle<Counter> counter = ray::Actor(CreateCounter).Remote(0);
//   auto sum = counter.Task(&Counter::Add).Remote(5);   // ray/api/actor_task_caller.h
//   counter.Kill();
//
// Handles are copyable and comparable (same actor), and may be passed to tasks and
// other actors as arguments or returned from them: the receiver gets a working
// handle. A default-constructed handle names no actor (calls through it throw).
//
// Lifetime: every handle of an unnamed, non-detached actor counts a reference, in
// whatever process it lives (like ObjectRef); when the last one is gone the actor is
// killed. Named and detached actors are not counted: they live until killed, until
// their owner dies (non-detached) or until the cluster stops (detached). Handles
// outliving ray::Shutdown() are inert.
//
// Kill() kills the actor for good: its pending and later calls fail with
// RayActorException. Kill(false) kills its process and lets it restart if it has
// restarts left (SetMaxRestarts). Both throw RayException before ray::Init() and for
// an actor the cluster does not know.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "ray/api/actor_task_caller.h"
#include "ray/api/object_ref.h"
#include "ray/api/ray_runtime.h"

namespace ray {

template <typename ActorType, bool IsCrossLang = false>
class ActorHandle {
 public:
  ActorHandle() = default;
  // Internal: a handle of the actor `actor_id`, holding `handle` (a nil ref for
  // actors whose handles are not counted).
  ActorHandle(std::string actor_id, ObjectRef<void> handle) : id_(std::move(actor_id)), handle_(std::move(handle)) {}

  // The actor's id (16 bytes, binary); empty for a default-constructed handle.
  const std::string& ID() const { return id_; }

  // A caller for `method`, a member function of ActorType registered with RAY_REMOTE.
  template <typename F>
  ActorTaskCaller<F> Task(F method) const {
    using Class = typename internal::MemberFunctionTraits<F>::Class;
    static_assert(internal::MemberFunctionTraits<F>::kIsMemberFunction,
                  "ActorHandle<T>::Task(f): f must be a member function, as &T::Method");
    static_assert(std::is_base_of_v<Class, ActorType>,
                  "ActorHandle<T>::Task(&C::Method): C must be T (or a base class of T)");
    return ActorTaskCaller<F>(id_, handle_.ID(), method);
  }

  void Kill() const { Kill(true); }
  void Kill(bool no_restart) const {
    internal::RayRuntime* runtime = internal::RequireRuntime("ActorHandle::Kill");
    if (id_.empty()) internal::ThrowNilActorHandle("ActorHandle::Kill");
    runtime->KillActor(id_, no_restart);
  }

  bool operator==(const ActorHandle& other) const { return id_ == other.id_; }
  bool operator!=(const ActorHandle& other) const { return id_ != other.id_; }

  // Internal: the reference this handle counts (nil when not counted).
  const ObjectRef<void>& HandleReference() const { return handle_; }

 private:
  std::string id_;
  ObjectRef<void> handle_;
};

}  // namespace ray

// The msgpack adaptor of ActorHandle: [bin actor id, handle reference]; the receiver
// of a counted handle becomes a borrower of its reference.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <typename T, bool X>
struct pack<ray::ActorHandle<T, X>> {
  template <typename Stream>
  msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& packer, const ray::ActorHandle<T, X>& handle) const {
    packer.pack_array(2);
    packer.pack_bin(static_cast<uint32_t>(handle.ID().size()));
    packer.pack_bin_body(handle.ID().data(), static_cast<uint32_t>(handle.ID().size()));
    packer.pack(handle.HandleReference());
    return packer;
  }
};

template <typename T, bool X>
struct convert<ray::ActorHandle<T, X>> {
  const msgpack::object& operator()(const msgpack::object& object, ray::ActorHandle<T, X>& handle) const {
    if (object.type != msgpack::type::ARRAY || object.via.array.size != 2 ||
        object.via.array.ptr[0].type != msgpack::type::BIN) {
      throw msgpack::type_error();
    }
    const msgpack::object_bin& id = object.via.array.ptr[0].via.bin;
    ray::ObjectRef<void> reference;
    object.via.array.ptr[1].convert(reference);
    handle = ray::ActorHandle<T, X>(std::string(id.ptr, id.size), std::move(reference));
    return object;
  }
};

}  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
