// Arrays of numbers packed raw: their layout, and the helpers the serializer uses.
//
// Internal to the API templates (user code includes ray/api.h).
//
// A value that is a std::vector of numbers (any arithmetic type but bool and the
// byte types char and unsigned char, which msgpack packs as one bin already) is
// packed raw, not as a msgpack array of tagged elements: one msgpack ext 32 value of
// type kRawArrayExtType whose payload starts with a 10-byte header (element size,
// kind 'i', 'u' or 'f', 8 zero bytes), then the elements as they lie in memory
// (little-endian). The value's 16 header bytes in all keep the elements 16-byte
// aligned wherever the object is, so they can be read in place (ray::GetView), and
// packing or decoding is one copy. Only the top-level value is packed so (a vector
// inside a struct stays a msgpack array); a vector of more than 4 GiB - 11 bytes is
// packed as a msgpack array too. Decoding accepts both forms.

#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace ray {
namespace internal {

template <typename T>
struct RawArrayTraits {
  static constexpr bool kRaw = false;
};
template <typename E>
struct RawArrayTraits<std::vector<E>> {
  static constexpr bool kRaw = std::is_arithmetic_v<E> && !std::is_same_v<E, bool> && !std::is_same_v<E, char> &&
                               !std::is_same_v<E, unsigned char>;
  using Element = E;
};

inline constexpr int8_t kRawArrayExtType = 0x52;
inline constexpr size_t kRawArrayHeaderBytes = 16;
inline constexpr uint64_t kMaxRawArrayBytes = 0xffffffffu - (kRawArrayHeaderBytes - 6);

template <typename E>
constexpr char RawKind() {
  return std::is_floating_point_v<E> ? 'f' : std::is_signed_v<E> ? 'i' : 'u';
}

// The elements of a raw array, where they lie.
struct RawArray {
  const char* data = nullptr;
  size_t count = 0;
  size_t element_size = 0;
  char kind = 0;
};
// Writes the 16-byte header of a raw array of `bytes` bytes of elements.
void WriteRawArrayHeader(char* dst, uint64_t bytes, size_t element_size, char kind);
// Whether [data, data + size) is exactly one well-formed raw array; fills `out`.
bool FindRawArray(const char* data, size_t size, RawArray* out);
// "float64", "int32", ...: a raw array's element type, for messages.
std::string RawElementName(size_t element_size, char kind);

// Whether integer `v` has the same value as an E.
template <typename E, typename S>
constexpr bool FitsIn(S v) {
  if constexpr (std::is_signed_v<S>) {
    if (v < 0) {
      return std::is_signed_v<E> && static_cast<intmax_t>(v) >= static_cast<intmax_t>(std::numeric_limits<E>::min());
    }
  }
  return static_cast<uintmax_t>(v) <= static_cast<uintmax_t>(std::numeric_limits<E>::max());
}

// Converts the elements of `array` (whose kind or size differ from E's) into `out`;
// returns why it cannot (empty when it did).
template <typename E>
std::string ConvertRawArray(const RawArray& array, std::vector<E>& out) {
  // As msgpack converts numbers: integers to any integer holding the value or to a
  // float, floats only to floats.
  auto convert = [&]<typename S>(S) -> std::string {
    if constexpr (std::is_floating_point_v<S> && !std::is_floating_point_v<E>) {
      return "its elements are floats";
    } else {
      out.resize(array.count);
      for (size_t i = 0; i < array.count; ++i) {
        S element;
        std::memcpy(&element, array.data + i * sizeof(S), sizeof(S));
        if constexpr (std::is_integral_v<S> && std::is_integral_v<E>) {
          if (!FitsIn<E>(element)) return "element " + std::to_string(i) + " does not fit";
        }
        out[i] = static_cast<E>(element);
      }
      return "";
    }
  };
  const size_t size = array.element_size;
  if (array.kind == 'f') {
    if (size == sizeof(float)) return convert(float{});
    if (size == sizeof(double)) return convert(double{});
    if (size == sizeof(long double)) return convert(static_cast<long double>(0));
  } else if (array.kind == 'i') {
    if (size == 1) return convert(int8_t{});
    if (size == 2) return convert(int16_t{});
    if (size == 4) return convert(int32_t{});
    if (size == 8) return convert(int64_t{});
  } else {
    if (size == 1) return convert(uint8_t{});
    if (size == 2) return convert(uint16_t{});
    if (size == 4) return convert(uint32_t{});
    if (size == 8) return convert(uint64_t{});
  }
  return "no such element type";
}

}  // namespace internal
}  // namespace ray
