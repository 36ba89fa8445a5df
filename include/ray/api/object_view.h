// Zero-copy reads and writes of bulk bytes (Manta extensions).
//
//   ray::ObjectRef<std::vector<uint8_t>> ref = ray::PutBytes(buffer, length);
//   ray::ObjectView<uint8_t> view = ray::GetView(ref);      // no copy
//   Consume(view.data(), view.size());                       // read in place
//
// ray::GetView(ref) waits for an object holding bytes (an ObjectRef of
// std::vector<uint8_t>, std::vector<char> or std::string) and
// returns a read-only view of them where they lie: in this node's shared-memory
// object store for a large object (nothing is copied or decoded, whatever its size),
// or in the process's memory for a small one. The object stays readable, and in the
// store (pinned: it cannot be evicted or spilled), while a view of it (or a copy of
// the view) lives; let views go when done, as the store cannot reuse their memory
// meanwhile. A view is immutable: the bytes are shared with every reader of the
// object on this node. GetView throws what ray::Get throws (RayTimeoutException after
// `timeout_ms` >= 0, the object's error), and RayException when the object does not
// hold bytes (it was not made from one of the types above).
//
// ray::PutBytes(data, size) stores `size` bytes as an ObjectRef<std::vector<uint8_t>>,
// copied once, straight from `data` into the object store (ray::Put of a
// std::vector<uint8_t> does the same with the vector's bytes). ray::Get of such an
// object decodes into a std::vector<uint8_t> with one copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ray/api/object_ref.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/serializer.h"

namespace ray {

template <typename T>
class ObjectView {
  static_assert(sizeof(T) == 1 && std::is_trivially_copyable_v<T>, "ray::ObjectView<T>: T is a byte type");

 public:
  using value_type = T;
  using const_iterator = const T*;

  ObjectView() = default;
  ObjectView(std::shared_ptr<const void> holder, const T* data, size_t size)
      : holder_(std::move(holder)), data_(data), size_(size) {}

  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::span<const T> span() const { return {data_, size_}; }
  // Lets go of the object (this copy of the view); the view is empty after.
  void Release() {
    holder_.reset();
    data_ = nullptr;
    size_ = 0;
  }

 private:
  std::shared_ptr<const void> holder_;  // keeps the object's bytes where they are
  const T* data_ = nullptr;
  size_t size_ = 0;
};

namespace internal {

template <typename T>
struct ViewElement {
  static constexpr bool kViewable = false;
  using Type = uint8_t;  // so that only GetView's static_assert reports the misuse
};
template <>
struct ViewElement<std::vector<uint8_t>> {
  static constexpr bool kViewable = true;
  using Type = uint8_t;
};
template <>
struct ViewElement<std::vector<char>> {
  static constexpr bool kViewable = true;
  using Type = char;
};
template <>
struct ViewElement<std::string> {
  static constexpr bool kViewable = true;
  using Type = char;
};

// Where the bytes of a msgpack bin or str value lie inside `object`; throws
// RayException naming `id` when the object is neither.
std::pair<const char*, size_t> PackedBytesOf(const ObjectData& object, const std::string& id);
// Stores `size` bytes as a msgpack bin object; returns its id (one local reference).
std::string PutPackedBytes(const void* data, size_t size);

}  // namespace internal

// The views of several objects, read together (all in the store at once, as ray::Get).
template <typename V>
auto GetView(const std::vector<ObjectRef<V>>& refs, int timeout_ms = -1) {
  static_assert(internal::ViewElement<V>::kViewable,
                "ray::GetView(refs): refs must be ObjectRefs of std::vector<uint8_t>, std::vector<char> "
                "or std::string");
  using T = typename internal::ViewElement<V>::Type;
  internal::RayRuntime* runtime = internal::RequireRuntime("ray::GetView()");
  std::vector<std::string> ids;
  ids.reserve(refs.size());
  for (const auto& ref : refs) {
    if (ref.IsNil()) throw internal::RayException("ray::GetView(): an ObjectRef is nil");
    ids.push_back(ref.ID());
  }
  std::vector<internal::ObjectData> got = runtime->Get(ids, timeout_ms);
  std::vector<ObjectView<T>> views;
  views.reserve(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    auto [data, size] = internal::PackedBytesOf(got[i], ids[i]);
    views.emplace_back(std::move(got[i].holder), reinterpret_cast<const T*>(data), size);
  }
  return views;
}

// Returns ObjectView<uint8_t> (std::vector<uint8_t>) or ObjectView<char>.
template <typename V>
auto GetView(const ObjectRef<V>& ref, int timeout_ms = -1) {
  static_assert(internal::ViewElement<V>::kViewable,
                "ray::GetView(ref): ref must be an ObjectRef of std::vector<uint8_t>, std::vector<char> "
                "or std::string");
  if constexpr (internal::ViewElement<V>::kViewable) {
    return std::move(GetView(std::vector<ObjectRef<V>>{ref}, timeout_ms).at(0));
  } else {
    return ObjectView<uint8_t>();
  }
}

inline ObjectRef<std::vector<uint8_t>> PutBytes(const void* data, size_t size) {
  return ObjectRef<std::vector<uint8_t>>(internal::PutPackedBytes(data, size), internal::AdoptReference{});
}

}  // namespace ray
