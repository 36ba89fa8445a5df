// Msgpack support for std::any values (task arguments and results), as Ray's C++
// serializer has it: Ray programs and test helpers pass std::vector<std::any>.
//
// A std::any is packed as the msgpack value of what it holds, when that is one of:
// msgpack::type::nil_t, bool, a signed or unsigned integer type, float, double,
// std::string, const char*, std::vector<char> or std::vector<uint8_t> (binary), or,
// nested, std::vector<std::any> or std::map<std::string, std::any>. Anything else
// throws ray::internal::RayException naming the type held. Unpacked, a value becomes
// a std::any holding: nil_t, bool, uint64_t (integers >= 0), int64_t (< 0), double,
// std::string, std::vector<char> (binary), std::vector<std::any> (arrays) or
// std::map<std::string, std::any> (maps with string keys; other maps throw). As with
// Ray (the same msgpack library), a float or double with a whole value is packed as
// an integer, and so comes back as one.
// Included by ray/api/serializer.h.
#pragma once

#include <msgpack.hpp>

#include <any>
#include <cstdint>
#include <map>
#include <string>
#include <typeinfo>
#include <vector>

#include "ray/api/ray_exception.h"

namespace ray {
namespace internal {
std::string DemangledTypeName(const std::type_info& type);
}  // namespace internal
}  // namespace ray

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<std::any> {
  template <typename Stream>
  packer<Stream>& operator()(packer<Stream>& o, const std::any& v) const {
    const std::type_info& t = v.type();
    if (t == typeid(msgpack::type::nil_t)) return o.pack_nil();
    if (t == typeid(bool)) return o.pack(std::any_cast<bool>(v));
    if (t == typeid(int)) return o.pack(std::any_cast<int>(v));
    if (t == typeid(long)) return o.pack(std::any_cast<long>(v));
    if (t == typeid(long long)) return o.pack(std::any_cast<long long>(v));
    if (t == typeid(short)) return o.pack(std::any_cast<short>(v));
    if (t == typeid(signed char)) return o.pack(std::any_cast<signed char>(v));
    if (t == typeid(unsigned)) return o.pack(std::any_cast<unsigned>(v));
    if (t == typeid(unsigned long)) return o.pack(std::any_cast<unsigned long>(v));
    if (t == typeid(unsigned long long)) return o.pack(std::any_cast<unsigned long long>(v));
    if (t == typeid(unsigned short)) return o.pack(std::any_cast<unsigned short>(v));
    if (t == typeid(unsigned char)) return o.pack(std::any_cast<unsigned char>(v));
    if (t == typeid(float)) return o.pack(std::any_cast<float>(v));
    if (t == typeid(double)) return o.pack(std::any_cast<double>(v));
    if (t == typeid(std::string)) return o.pack(std::any_cast<const std::string&>(v));
    if (t == typeid(const char*)) return o.pack(std::string(std::any_cast<const char*>(v)));
    if (t == typeid(std::vector<char>)) return o.pack(std::any_cast<const std::vector<char>&>(v));
    if (t == typeid(std::vector<uint8_t>)) return o.pack(std::any_cast<const std::vector<uint8_t>&>(v));
    if (t == typeid(std::vector<std::any>)) return o.pack(std::any_cast<const std::vector<std::any>&>(v));
    if (t == typeid(std::map<std::string, std::any>)) {
      return o.pack(std::any_cast<const std::map<std::string, std::any>&>(v));
    }
    throw ray::internal::RayException(
        "cannot serialize a std::any holding " + ray::internal::DemangledTypeName(t) +
        ": it may hold nil_t, bool, integers, float, double, std::string, const char*, std::vector<char or "
        "uint8_t>, std::vector<std::any> or std::map<std::string, std::any>");
  }
};

template <>
struct convert<std::any> {
  const msgpack::object& operator()(const msgpack::object& o, std::any& v) const {
    switch (o.type) {
      case msgpack::type::NIL:
        v = msgpack::type::nil_t();
        break;
      case msgpack::type::BOOLEAN:
        v = o.as<bool>();
        break;
      case msgpack::type::POSITIVE_INTEGER:
        v = o.as<uint64_t>();
        break;
      case msgpack::type::NEGATIVE_INTEGER:
        v = o.as<int64_t>();
        break;
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64:
        v = o.as<double>();
        break;
      case msgpack::type::STR:
        v = o.as<std::string>();
        break;
      case msgpack::type::BIN:
        v = o.as<std::vector<char>>();
        break;
      case msgpack::type::ARRAY:
        v = o.as<std::vector<std::any>>();
        break;
      case msgpack::type::MAP:
        v = o.as<std::map<std::string, std::any>>();
        break;
      default:
        throw msgpack::type_error();
    }
    return o;
  }
};

}  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
