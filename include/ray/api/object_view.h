// Zero-copy reads and writes of bulk data (Manta extensions).
//
//   ray::ObjectRef<std::vector<uint8_t>> ref = ray::PutBytes(buffer, length);
//   ray::ObjectView<uint8_t> view = ray::GetView(ref);      // no copy
//   Consume(view.data(), view.size());                       // read in place
//
//   ray::ObjectRef<std::vector<double>> prices = ray::Put(std::vector<double>(n));
//   ray::ObjectView<double> p = ray::GetView(prices);         // no copy either
//   double first = p[0];
//
// ray::GetView(ref) waits for an object holding bytes (an ObjectRef of
// std::vector<uint8_t>, std::vector<char> or std::string) or numbers (an ObjectRef of
// a std::vector of any arithmetic type but bool) and returns a read-only view of its
// elements where they lie: in this node's shared-memory object store for a large
// object (nothing is copied or decoded, whatever its size), or in the process's
// memory for a small one. The object stays readable, and in the store (pinned: it
// cannot be evicted or spilled), while a view of it (or a copy of the view) lives;
// let views go when done, as the store cannot reuse their memory meanwhile. A view
// is immutable: the elements are shared with every reader of the object on this
// node. GetView throws what ray::Get throws (RayTimeoutException after
// `timeout_ms` >= 0, the object's error), and RayException when the object does not
// hold bytes or numbers (it was not made from one of the types above). A vector of
// numbers is stored raw (see ray/api/serializer.h), so its view is in place; one
// stored otherwise (over 4 GiB, or put as another number type) is decoded once
// into memory the view holds.
//
// ray::PutBytes(data, size) stores `size` bytes as an ObjectRef<std::vector<uint8_t>>,
// and ray::PutArray(data, count) `count` numbers as an ObjectRef<std::vector<E>>,
// copied once, straight from `data` into the object store (ray::Put of such a vector
// does the same with the vector's elements). ray::Get of these objects decodes into
// a vector with one copy.
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
  static_assert(std::is_trivially_copyable_v<T>, "ray::ObjectView<T>: T is trivially copyable");

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

// Where the bytes of a msgpack bin or str value lie inside `object`; throws
// RayException naming `id` when the object is neither.
std::pair<const char*, size_t> PackedBytesOf(const ObjectData& object, const std::string& id);
// Stores `size` bytes as a msgpack bin object; returns its id (one local reference).
std::string PutPackedBytes(const void* data, size_t size);
// Stores `count` elements of `element_size` bytes and `kind` as a raw array; returns
// its id (one local reference).
std::string PutRawArray(const void* data, size_t count, size_t element_size, char kind);

template <typename V>
constexpr bool kViewable = ContiguousTraits<V>::kBytes || ContiguousTraits<V>::kNumbers;

// The view of one object got for ray::GetView.
template <typename V>
ObjectView<typename ContiguousTraits<V>::Element> ViewOf(ObjectData object, const std::string& id) {
  using E = typename ContiguousTraits<V>::Element;
  if constexpr (ContiguousTraits<V>::kBytes) {
    auto [data, size] = PackedBytesOf(object, id);
    return {std::move(object.holder), reinterpret_cast<const E*>(data), size};
  } else {
    RawArray array;
    if (FindRawArray(object.data, object.size, &array) && array.element_size == sizeof(E) &&
        array.kind == RawKind<E>() && reinterpret_cast<uintptr_t>(array.data) % alignof(E) == 0) {
      return {std::move(object.holder), reinterpret_cast<const E*>(array.data), array.count};
    }
    // Not where it could be read in place (another encoding or element type, or a
    // small object at an odd address): decoded once, into memory the view holds.
    std::shared_ptr<V> copy = DecodeShared<V>(object, id, [&] { return "ray::GetView of object " + HexId(id); });
    return {copy, copy->data(), copy->size()};
  }
}

}  // namespace internal

// The views of several objects, read together (all in the store at once, as ray::Get).
template <typename V>
auto GetView(const std::vector<ObjectRef<V>>& refs, int timeout_ms = -1) {
  static_assert(internal::kViewable<V>,
                "ray::GetView(refs): refs must be ObjectRefs of std::vector<uint8_t>, std::vector<char>, "
                "std::string or a std::vector of numbers");
  using T = typename internal::ContiguousTraits<V>::Element;
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
  for (size_t i = 0; i < got.size(); ++i) views.push_back(internal::ViewOf<V>(std::move(got[i]), ids[i]));
  return views;
}

// Returns ObjectView<uint8_t> (std::vector<uint8_t>), ObjectView<char> (std::string,
// std::vector<char>) or ObjectView<E> (std::vector<E> of numbers).
template <typename V>
auto GetView(const ObjectRef<V>& ref, int timeout_ms = -1) {
  static_assert(internal::kViewable<V>,
                "ray::GetView(ref): ref must be an ObjectRef of std::vector<uint8_t>, std::vector<char>, "
                "std::string or a std::vector of numbers");
  if constexpr (internal::kViewable<V>) {
    return std::move(GetView(std::vector<ObjectRef<V>>{ref}, timeout_ms).at(0));
  } else {
    return ObjectView<uint8_t>();
  }
}

inline ObjectRef<std::vector<uint8_t>> PutBytes(const void* data, size_t size) {
  return ObjectRef<std::vector<uint8_t>>(internal::PutPackedBytes(data, size), internal::AdoptReference{});
}

// Stores `count` numbers (any arithmetic type but bool; bytes go through PutBytes)
// as an ObjectRef<std::vector<E>>, copied once into the store.
template <typename E>
ObjectRef<std::vector<E>> PutArray(const E* data, size_t count) {
  static_assert(internal::RawArrayTraits<std::vector<E>>::kRaw,
                "ray::PutArray: E is a number type (not bool; bytes go through ray::PutBytes)");
  return ObjectRef<std::vector<E>>(internal::PutRawArray(data, count, sizeof(E), internal::RawKind<E>()),
                                   internal::AdoptReference{});
}
template <typename E>
ObjectRef<std::vector<std::remove_const_t<E>>> PutArray(std::span<E> elements) {
  return PutArray<std::remove_const_t<E>>(elements.data(), elements.size());
}

}  // namespace ray
