// Msgpack serialization of API values, and the thread-local context nested refs need.
//
// Internal to the API templates (user code includes ray/api.h). Values are encoded
// with msgpack-cxx: any type msgpack can pack and convert works, including structs
// with MSGPACK_DEFINE and the standard containers; ObjectRef<T> has its own adaptor
// (ray/api/object_ref.h), and std::any one as Ray's (ray/api/msgpack_any.h).
//
// Serialization is two-pass so a runtime can write a large value straight into its
// final place (shared memory): a counting pass computes the exact size and collects
// the ids of ObjectRefs inside the value, then `write(dst)` packs again into dst.
//
// Two thread-local scopes connect the ObjectRef adaptor to the code around it:
// - ContainedRefCollector: while alive on a thread, every ObjectRef packed on that
//   thread appends its id to the collector's list (SerializedValue::contained_ids);
// - DeserializationScope: while alive on a thread, every ObjectRef unpacked on that
//   thread is registered (RayRuntime::RegisterBorrowedRef) as found inside the
//   scope's object id (empty: found in a task argument passed by value).
// Both nest (an inner scope hides the outer one until it ends).
#pragma once

#include <msgpack.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ray/api/msgpack_any.h"
#include "ray/api/ray_exception.h"
#include "ray/api/ray_runtime.h"
#include "ray/api/raw_array.h"

namespace ray {
namespace internal {

// ---- Helpers implemented in src/api/serializer.cc -------------------------------

// The demangled name of a type, e.g. "std::vector<int, std::allocator<int> >".
std::string DemangledTypeName(const std::type_info& type);
template <typename T>
std::string TypeName() {
  return DemangledTypeName(typeid(T));
}

// Lower-case hex of a binary id, for messages ("nil" when empty).
std::string HexId(const std::string& id);

// The runtime, or throws RayException("<caller>: ray::Init() has not been called").
RayRuntime* RequireRuntime(const char* caller);

// Parses one msgpack value from `data` into `zone` without copying strings or
// binaries out of it: `data` and `zone` must stay alive while the returned object is
// used. Throws msgpack::unpack_error (a std::exception) on malformed bytes.
msgpack::object UnpackView(const char* data, size_t size, msgpack::zone& zone);

// The zone one decode builds its object in: the calling thread's own, reused and
// cleared afterwards (msgpack::unpack would malloc a zone and its first 8 KiB chunk
// for every value decoded), or a fresh one for a decode nested in another.
class DecodeZone {
 public:
  DecodeZone();
  ~DecodeZone();
  DecodeZone(const DecodeZone&) = delete;
  DecodeZone& operator=(const DecodeZone&) = delete;
  msgpack::zone& get() { return *zone_; }

 private:
  msgpack::zone* zone_;
  std::unique_ptr<msgpack::zone> own_;
};

class ContainedRefCollector {
 public:
  explicit ContainedRefCollector(std::vector<std::string>* ids);
  ~ContainedRefCollector();
  ContainedRefCollector(const ContainedRefCollector&) = delete;
  ContainedRefCollector& operator=(const ContainedRefCollector&) = delete;

  // Adds `id` to the innermost collector alive on this thread, if any.
  static void Record(const std::string& id);

 private:
  std::vector<std::string>* previous_;
};

class DeserializationScope {
 public:
  explicit DeserializationScope(const std::string& outer_id);
  ~DeserializationScope();
  DeserializationScope(const DeserializationScope&) = delete;
  DeserializationScope& operator=(const DeserializationScope&) = delete;

  // The innermost scope's object id on this thread; empty without a scope.
  static const std::string& CurrentOuterId();

 private:
  const std::string* previous_;
};

// ---- Streams for msgpack::packer ---------------------------------------------------

// Counts the bytes packed into it.
class CountingStream {
 public:
  void write(const char* /*data*/, size_t size) { size_ += size; }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

// Writes into a fixed buffer of known capacity; throws RayException on overflow.
class FixedBufferStream {
 public:
  FixedBufferStream(char* dst, size_t capacity) : dst_(dst), capacity_(capacity) {}
  void write(const char* data, size_t size) {
    if (size > capacity_ - used_) ThrowSizeChanged();
    std::memcpy(dst_ + used_, data, size);
    used_ += size;
  }
  size_t used() const { return used_; }
  [[noreturn]] void ThrowSizeChanged() const {
    throw RayException(
        "serialization: the value changed size between the counting and the writing "
        "pass (was it modified on another thread while ray::Put or Remote ran?)");
  }

 private:
  char* dst_;
  size_t capacity_;
  size_t used_ = 0;
};

// ---- Serialization -------------------------------------------------------------------

// Packs `value` into exactly `size` bytes at dst (the size a counting pass found).
template <typename T>
void PackInto(const T& value, char* dst, size_t size) {
  if constexpr (RawArrayTraits<T>::kRaw) {
    using E = typename RawArrayTraits<T>::Element;
    const uint64_t bytes = uint64_t{value.size()} * sizeof(E);
    if (bytes <= kMaxRawArrayBytes) {
      if (size != kRawArrayHeaderBytes + bytes) FixedBufferStream(dst, 0).ThrowSizeChanged();
      WriteRawArrayHeader(dst, bytes, sizeof(E), RawKind<E>());
      if (bytes > 0) std::memcpy(dst + kRawArrayHeaderBytes, value.data(), bytes);
      return;
    }
  }
  FixedBufferStream stream(dst, size);
  msgpack::pack(stream, value);
  if (stream.used() != size) stream.ThrowSizeChanged();
}

// Counting pass: the packed size of `value`; appends nested ref ids to `contained`.
template <typename T>
size_t PackedSize(const T& value, std::vector<std::string>* contained) {
  if constexpr (RawArrayTraits<T>::kRaw) {
    const uint64_t bytes = uint64_t{value.size()} * sizeof(typename RawArrayTraits<T>::Element);
    if (bytes <= kMaxRawArrayBytes) return kRawArrayHeaderBytes + bytes;
  }
  ContainedRefCollector collector(contained);
  CountingStream counter;
  msgpack::pack(counter, value);
  return counter.size();
}

// A lazy SerializedValue that keeps `value` alive (shares ownership).
template <typename T>
SerializedValue SerializeShared(std::shared_ptr<const T> value) {
  SerializedValue out;
  out.size = PackedSize(*value, &out.contained_ids);
  out.write = [value = std::move(value), size = out.size](char* dst) { PackInto(*value, dst, size); };
  return out;
}

// The values of a ray::Returns<T> (any std::vector), each a part of its own that
// keeps the whole alive.
template <typename Vector>
SerializedValue SerializeParts(std::shared_ptr<const Vector> values) {
  SerializedValue out;
  out.multiple = true;
  out.parts.reserve(values->size());
  for (const auto& value : *values) {
    using T = std::remove_cvref_t<decltype(value)>;
    out.parts.push_back(SerializeShared(std::shared_ptr<const T>(values, &value)));
  }
  return out;
}

// A lazy SerializedValue that reads `value` in place: `write` is valid only while
// `value` lives unchanged (ray::Put: until RayRuntime::Put returns).
template <typename T>
SerializedValue SerializeBorrowed(const T& value) {
  // Aliasing constructor with an empty owner: a non-owning shared_ptr.
  return SerializeShared(std::shared_ptr<const T>(std::shared_ptr<const void>(), &value));
}

// A SerializedValue holding its own copy of the packed bytes (task arguments).
template <typename T>
SerializedValue SerializeCopy(const T& value) {
  SerializedValue out;
  out.size = PackedSize(value, &out.contained_ids);
  auto bytes = std::make_shared<std::string>(out.size, '\0');
  PackInto(value, bytes->data(), out.size);
  out.write = [bytes](char* dst) { std::memcpy(dst, bytes->data(), bytes->size()); };
  return out;
}

// The result of a function returning void: msgpack nil (one byte, 0xc0).
SerializedValue SerializeNil();

// ---- Deserialization ----------------------------------------------------------------

// The text of a decoding context: a string, or a callable building it (so the hot
// path never formats a message it does not throw).
template <typename Context>
std::string ContextText(const Context& context) {
  if constexpr (std::is_invocable_v<const Context&>) {
    return context();
  } else {
    return std::string(context);
  }
}

// Unpacks the bytes and runs `convert(msgpack::object)` inside the scope and error
// translation both decoders share.
template <typename T, typename Context, typename Convert>
auto DecodeWith(const char* data, size_t size, const std::string& outer_id, const Context& context,
                Convert convert) {
  DeserializationScope scope(outer_id);
  try {
    DecodeZone zone;
    return convert(UnpackView(data, size, zone.get()));
  } catch (const RayException&) {
    throw;
  } catch (const std::exception& e) {
    throw RayException(ContextText(context) + ": the bytes do not decode as " + TypeName<T>() + " (" + e.what() +
                       ")");
  }
}

// Where the bytes of a msgpack bin or str filling [data, data + size) lie; false for
// any other value.
bool FindPackedBytes(const char* data, size_t size, const char** bytes, size_t* length);
// Asks the kernel to back [data, data + size) with huge pages when it is large and
// not yet touched (fewer page faults when a large decoded value is first written).
void AdviseHugePages(void* data, size_t size);

// The containers whose elements a value packs contiguously: bytes (a msgpack bin
// or str) or numbers (a raw array). Element is what a view of them holds.
template <typename T>
struct ElementOf {
  using Type = uint8_t;
};
template <typename E>
struct ElementOf<std::vector<E>> {
  using Type = E;
};
template <typename T>
struct ContiguousTraits {
  static constexpr bool kBytes = false;
  static constexpr bool kNumbers = RawArrayTraits<T>::kRaw;
  using Element = typename ElementOf<T>::Type;
};
template <>
struct ContiguousTraits<std::vector<uint8_t>> {
  static constexpr bool kBytes = true;
  static constexpr bool kNumbers = false;
  using Element = uint8_t;
};
template <>
struct ContiguousTraits<std::vector<char>> {
  static constexpr bool kBytes = true;
  static constexpr bool kNumbers = false;
  using Element = char;
};
template <>
struct ContiguousTraits<std::string> {
  static constexpr bool kBytes = true;
  static constexpr bool kNumbers = false;
  using Element = char;
};

// Copies `count` elements at `first` into `out` in one pass (msgpack's adaptors and
// resize() zero-fill first); a large new buffer is advised onto huge pages.
template <typename T>
void AssignElements(const char* first, size_t count, T& out) {
  using E = typename T::value_type;
  if (out.capacity() < count) {
    out = T();
    out.reserve(count);
    AdviseHugePages(out.data(), count * sizeof(E));
  }
  if (reinterpret_cast<uintptr_t>(first) % alignof(E) == 0) {
    const auto* begin = reinterpret_cast<const E*>(first);
    out.assign(begin, begin + count);
  } else {
    out.resize(count);
    if (count > 0) std::memcpy(out.data(), first, count * sizeof(E));
  }
}

// Decodes `size` bytes at `data` into `out`; refs inside are registered as contained
// in `outer_id`. Errors: RayException naming `context` (a string, or a callable
// returning one) and T when the bytes do not decode as T (exceptions thrown by
// nested ObjectRef adaptors pass through).
template <typename T, typename Context>
void DecodeInto(const char* data, size_t size, const std::string& outer_id, const Context& context, T& out) {
  if constexpr (ContiguousTraits<T>::kBytes) {
    const char* bytes = nullptr;
    size_t length = 0;
    if (FindPackedBytes(data, size, &bytes, &length)) return AssignElements(bytes, length, out);
  } else if constexpr (ContiguousTraits<T>::kNumbers) {
    using E = typename ContiguousTraits<T>::Element;
    RawArray array;
    if (FindRawArray(data, size, &array)) {
      if (array.element_size == sizeof(E) && array.kind == RawKind<E>()) {
        return AssignElements(array.data, array.count, out);
      }
      const std::string failed = ConvertRawArray(array, out);
      if (failed.empty()) return;
      throw RayException(ContextText(context) + ": the bytes (a raw array of " +
                         RawElementName(array.element_size, array.kind) + ") do not decode as " + TypeName<T>() +
                         " (" + failed + ")");
    }
  }
  DecodeWith<T>(data, size, outer_id, context, [&out](const msgpack::object& o) { o.convert(out); });
}

// Like DecodeInto, returning a value (for types without a default constructor).
template <typename T, typename Context>
T DecodeValue(const char* data, size_t size, const std::string& outer_id, const Context& context) {
  return DecodeWith<T>(data, size, outer_id, context, [](const msgpack::object& o) { return o.as<T>(); });
}

// Decodes an object into a new heap value (no large temporaries on the stack).
template <typename T, typename Context>
std::shared_ptr<T> DecodeShared(const ObjectData& object, const std::string& object_id, const Context& context) {
  if constexpr (std::is_default_constructible_v<T>) {
    auto value = std::make_shared<T>();
    DecodeInto(object.data, object.size, object_id, context, *value);
    return value;
  } else {
    return std::make_shared<T>(DecodeValue<T>(object.data, object.size, object_id, context));
  }
}

}  // namespace internal
}  // namespace ray
