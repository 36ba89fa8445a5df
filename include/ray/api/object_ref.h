// ray::ObjectRef<T>: a future for a value of type T that lives in the cluster.
//
// An ObjectRef is returned by ray::Put and by ray::Task(f).Remote(...). The object it
// names is in one of three states:
//   pending  the task computing it has not finished (Put objects are never pending);
//   ready    it has a value: Get() returns it (a fresh shared_ptr<T> per call);
//   failed   it holds an error: every Get() throws the matching RayException
//            subclass (ray/api/ray_exception.h), e.g. RayTaskException when the
//            task's function threw.
// Pending → ready or pending → failed happens once; the value never changes after.
//
// Reference counting: each live ObjectRef holds one local reference on its object;
// copies add one, destructors and moved-from refs give theirs back. When the last
// reference in the cluster is gone the object is freed. An ObjectRef may be
// serialized inside other values (a vector of refs, a struct with MSGPACK_DEFINE,
// ObjectRef<ObjectRef<T>>): the receiver gets a working ref and keeps the object
// alive while it holds it.
//
// Threads: an ObjectRef may be copied, destroyed and waited on from any thread; one
// ObjectRef object must not be assigned on one thread while used on another (like
// std::shared_ptr). Refs that outlive ray::Shutdown() are inert: destroying them is
// safe and does nothing; Get on them throws RayException.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/serializer.h"

namespace ray {
namespace internal {

// Tag: build an ObjectRef that adopts the local reference an id already carries
// (the ids returned by RayRuntime::Put and SubmitTask). Internal.
struct AdoptReference {};

// The reference counting shared by every ObjectRef<T> (and ObjectRef<void>).
class ObjectRefBase {
 public:
  // The object's binary id (28 bytes); empty for a nil (default or moved-from) ref.
  const std::string& ID() const { return id_; }
  // Manta addition: true for a default-constructed or moved-from ref.
  bool IsNil() const { return id_.empty(); }

 protected:
  ObjectRefBase() = default;
  explicit ObjectRefBase(const std::string& id) : id_(id) { Acquire(); }
  ObjectRefBase(std::string id, AdoptReference) : id_(std::move(id)), epoch_(GetRayRuntimeEpoch()) {}
  ObjectRefBase(const ObjectRefBase& other) : id_(other.id_) { Acquire(); }
  ObjectRefBase(ObjectRefBase&& other) noexcept : id_(std::move(other.id_)), epoch_(other.epoch_) {
    other.id_.clear();
  }
  ObjectRefBase& operator=(const ObjectRefBase& other) {
    if (this != &other) {
      ObjectRefBase copy(other);
      Swap(copy);
    }
    return *this;
  }
  ObjectRefBase& operator=(ObjectRefBase&& other) noexcept {
    if (this != &other) {
      Release();
      id_ = std::move(other.id_);
      epoch_ = other.epoch_;
      other.id_.clear();
    }
    return *this;
  }
  ~ObjectRefBase() { Release(); }

 private:
  void Swap(ObjectRefBase& other) noexcept {
    id_.swap(other.id_);
    std::swap(epoch_, other.epoch_);
  }
  void Acquire() {
    if (id_.empty()) return;
    epoch_ = GetRayRuntimeEpoch();
    if (RayRuntime* runtime = GetRayRuntime()) runtime->AddLocalReference(id_);
  }
  void Release() noexcept {
    if (id_.empty() || epoch_ != GetRayRuntimeEpoch()) return;
    if (RayRuntime* runtime = GetRayRuntime()) runtime->RemoveLocalReference(id_);
  }

  std::string id_;
  uint64_t epoch_ = 0;  // the runtime epoch our reference belongs to
};

// Fetches and decodes one object; see ray::Get.
template <typename T>
std::shared_ptr<T> GetObject(const std::string& id, int64_t timeout_ms, const char* caller) {
  RayRuntime* runtime = RequireRuntime(caller);
  if (id.empty()) throw RayException(std::string(caller) + ": the ObjectRef is nil (default-constructed or moved from)");
  std::vector<ObjectData> data = runtime->Get({id}, timeout_ms);
  return DecodeShared<T>(data.at(0), id, [&] { return std::string(caller) + " of object " + HexId(id); });
}

// Waits for one object and throws its error, if any; see ray::Get(ObjectRef<void>).
void WaitForVoidObject(const std::string& id, int64_t timeout_ms, const char* caller);

// Packing and unpacking of a ref inside a value (src/api/serializer.cc).
// Records `id` in the active ContainedRefCollector and returns its owner address.
std::string OwnerAddressForPacking(const std::string& id);
// Reads [id, owner] from `object` and, for a non-nil id, registers the ref with the
// runtime as borrowed (outer id: the current DeserializationScope). Returns the id.
// Throws msgpack::type_error on a malformed ref, RayException without a runtime.
std::string UnpackObjectRef(const msgpack::object& object);
// Packs the wire form of a ref: a msgpack array [bin id, bin owner_address].
template <typename Stream>
void PackObjectRef(msgpack::packer<Stream>& packer, const std::string& id) {
  std::string owner = id.empty() ? std::string() : OwnerAddressForPacking(id);
  packer.pack_array(2);
  packer.pack_bin(static_cast<uint32_t>(id.size()));
  packer.pack_bin_body(id.data(), static_cast<uint32_t>(id.size()));
  packer.pack_bin(static_cast<uint32_t>(owner.size()));
  packer.pack_bin_body(owner.data(), static_cast<uint32_t>(owner.size()));
}

}  // namespace internal

template <typename T>
class ObjectRef : public internal::ObjectRefBase {
 public:
  // A nil ref (names no object).
  ObjectRef() = default;
  // A ref to the object with binary id `id`; takes a local reference on it.
  explicit ObjectRef(const std::string& id) : ObjectRefBase(id) {}
  // Internal: adopts the reference `id` already carries (see AdoptReference).
  ObjectRef(std::string id, internal::AdoptReference tag) : ObjectRefBase(std::move(id), tag) {}

  // Blocks until the object is ready and returns a copy of its value. Throws the
  // object's error (RayTaskException, ...) if it failed, RayException for a nil
  // ref or without a runtime, or when the bytes do not decode as T.
  std::shared_ptr<T> Get() const { return internal::GetObject<T>(ID(), -1, "ObjectRef::Get"); }
  // As Get(), giving up after `timeout_ms` (-1 = forever) with RayTimeoutException.
  std::shared_ptr<T> Get(int timeout_ms) const { return internal::GetObject<T>(ID(), timeout_ms, "ObjectRef::Get"); }

  bool operator==(const ObjectRef& other) const { return ID() == other.ID(); }
  bool operator!=(const ObjectRef& other) const { return ID() != other.ID(); }
};

// The future of a function returning void: it has no value, only completion.
template <>
class ObjectRef<void> : public internal::ObjectRefBase {
 public:
  ObjectRef() = default;
  explicit ObjectRef(const std::string& id) : ObjectRefBase(id) {}
  ObjectRef(std::string id, internal::AdoptReference tag) : ObjectRefBase(std::move(id), tag) {}

  // Blocks until the task finished; throws its error if it failed (as Get above).
  void Get() const { internal::WaitForVoidObject(ID(), -1, "ObjectRef::Get"); }
  void Get(int timeout_ms) const { internal::WaitForVoidObject(ID(), timeout_ms, "ObjectRef::Get"); }

  bool operator==(const ObjectRef& other) const { return ID() == other.ID(); }
  bool operator!=(const ObjectRef& other) const { return ID() != other.ID(); }
};

}  // namespace ray

// The msgpack adaptor of ObjectRef<T>: packs [id, owner_address] and records the id
// as contained in the value being serialized; unpacking registers the ref as
// borrowed and builds an ObjectRef holding a local reference.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <typename T>
struct pack<ray::ObjectRef<T>> {
  template <typename Stream>
  msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& packer, const ray::ObjectRef<T>& ref) const {
    ray::internal::PackObjectRef(packer, ref.ID());
    return packer;
  }
};

template <typename T>
struct convert<ray::ObjectRef<T>> {
  const msgpack::object& operator()(const msgpack::object& object, ray::ObjectRef<T>& ref) const {
    std::string id = ray::internal::UnpackObjectRef(object);
    ref = id.empty() ? ray::ObjectRef<T>() : ray::ObjectRef<T>(id);
    return object;
  }
};

}  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
