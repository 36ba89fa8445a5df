// The non-template half of ray/api/serializer.h and of the ObjectRef adaptor.
#include "ray/api/serializer.h"

#include <cxxabi.h>
#include <sys/mman.h>

#include <bit>
#include <cstdio>
#include <cstdlib>

#include "ray/api/object_ref.h"

namespace ray {
namespace internal {
namespace {

thread_local std::vector<std::string>* tls_collector = nullptr;
thread_local const std::string* tls_outer_id = nullptr;
thread_local msgpack::zone tls_zone;
thread_local bool tls_zone_in_use = false;

// Strings and binaries inside a value are read where they lie: every caller keeps
// the bytes alive while it converts the parsed object.
bool ReferenceEverything(msgpack::type::object_type /*type*/, size_t /*size*/, void* /*user_data*/) {
  return true;
}

// Checks, before msgpack builds anything, that the containers in `size` bytes declare
// at most as many elements as those bytes can hold (each element takes at least one
// byte of its own). msgpack reserves room for a container's elements as soon as it
// reads the header: five bytes declaring 2^32 - 1 elements would ask for ~100 GB, and
// nested headers would add up.
class DeclaredSizeCheck : public msgpack::null_visitor {
 public:
  explicit DeclaredSizeCheck(size_t size) : budget_(size) {}
  bool start_array(uint32_t num_elements) { return Take(num_elements); }
  bool start_map(uint32_t num_kv_pairs) { return Take(uint64_t{2} * num_kv_pairs); }
  void parse_error(size_t /*parsed_offset*/, size_t /*error_offset*/) { throw msgpack::parse_error("parse error"); }
  void insufficient_bytes(size_t /*parsed_offset*/, size_t /*error_offset*/) {
    throw msgpack::insufficient_bytes("insufficient bytes");
  }

 private:
  bool Take(uint64_t elements) {
    if (elements > budget_) throw msgpack::size_overflow("a container declares more elements than the bytes hold");
    budget_ -= elements;
    return true;
  }
  uint64_t budget_;
};

std::string ReadBytes(const msgpack::object& object) {
  if (object.type == msgpack::type::BIN) return std::string(object.via.bin.ptr, object.via.bin.size);
  if (object.type == msgpack::type::STR) return std::string(object.via.str.ptr, object.via.str.size);
  throw msgpack::type_error();
}

}  // namespace

std::string DemangledTypeName(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return type.name();
  std::string name(demangled);
  std::free(demangled);
  return name;
}

std::string HexId(const std::string& id) {
  if (id.empty()) return "nil";
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(id.size() * 2);
  for (unsigned char c : id) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 0xf]);
  }
  return hex;
}

RayRuntime* RequireRuntime(const char* caller) {
  RayRuntime* runtime = GetRayRuntime();
  if (runtime == nullptr) {
    throw RayException(std::string(caller) + ": ray::Init() has not been called (or ray::Shutdown() has)");
  }
  return runtime;
}

msgpack::object UnpackView(const char* data, size_t size, msgpack::zone& zone) {
  DeclaredSizeCheck check(size);
  msgpack::parse(data, size, check);
  return msgpack::unpack(zone, data, size, &ReferenceEverything);
}

DecodeZone::DecodeZone() {
  if (tls_zone_in_use) {
    own_ = std::make_unique<msgpack::zone>();
    zone_ = own_.get();
  } else {
    tls_zone_in_use = true;
    zone_ = &tls_zone;
  }
}

DecodeZone::~DecodeZone() {
  if (own_ != nullptr) return;
  tls_zone.clear();  // keeps its first chunk; frees any a large value added
  tls_zone_in_use = false;
}

ContainedRefCollector::ContainedRefCollector(std::vector<std::string>* ids) : previous_(tls_collector) {
  tls_collector = ids;
}
ContainedRefCollector::~ContainedRefCollector() { tls_collector = previous_; }
void ContainedRefCollector::Record(const std::string& id) {
  if (tls_collector != nullptr) tls_collector->push_back(id);
}

DeserializationScope::DeserializationScope(const std::string& outer_id) : previous_(tls_outer_id) {
  tls_outer_id = &outer_id;
}
DeserializationScope::~DeserializationScope() { tls_outer_id = previous_; }
const std::string& DeserializationScope::CurrentOuterId() {
  static const std::string kNone;
  return tls_outer_id != nullptr ? *tls_outer_id : kNone;
}

SerializedValue SerializeNil() {
  SerializedValue out;
  out.size = 1;
  out.write = [](char* dst) { dst[0] = static_cast<char>(0xc0); };
  return out;
}

std::string OwnerAddressForPacking(const std::string& id) {
  RayRuntime* runtime = RequireRuntime("serializing an ObjectRef");
  ContainedRefCollector::Record(id);
  return runtime->GetOwnerAddress(id);
}

std::string UnpackObjectRef(const msgpack::object& object) {
  if (object.type != msgpack::type::ARRAY || object.via.array.size != 2) throw msgpack::type_error();
  std::string id = ReadBytes(object.via.array.ptr[0]);
  if (id.empty()) return id;
  std::string owner = ReadBytes(object.via.array.ptr[1]);
  RayRuntime* runtime = RequireRuntime("deserializing an ObjectRef");
  runtime->RegisterBorrowedRef(id, owner, DeserializationScope::CurrentOuterId());
  return id;
}

bool FindPackedBytes(const char* data, size_t size, const char** bytes, size_t* length) {
  if (size == 0) return false;
  const auto* u = reinterpret_cast<const uint8_t*>(data);
  size_t header = 0, n = 0;
  auto big_endian = [&](size_t width) {
    size_t v = 0;
    for (size_t i = 1; i <= width; ++i) v = (v << 8) | u[i];
    return v;
  };
  if (u[0] >= 0xa0 && u[0] <= 0xbf) {  // fixstr
    header = 1;
    n = u[0] & 0x1f;
  } else if ((u[0] == 0xc4 || u[0] == 0xd9) && size >= 2) {  // bin 8, str 8
    header = 2;
    n = big_endian(1);
  } else if ((u[0] == 0xc5 || u[0] == 0xda) && size >= 3) {  // bin 16, str 16
    header = 3;
    n = big_endian(2);
  } else if ((u[0] == 0xc6 || u[0] == 0xdb) && size >= 5) {  // bin 32, str 32
    header = 5;
    n = big_endian(4);
  } else {
    return false;
  }
  if (header + n != size) return false;  // one value, filling the object exactly
  *bytes = data + header;
  *length = n;
  return true;
}

void WriteRawArrayHeader(char* dst, uint64_t bytes, size_t element_size, char kind) {
  static_assert(std::endian::native == std::endian::little, "raw arrays are little-endian");
  const uint64_t length = bytes + kRawArrayHeaderBytes - 6;  // the ext payload: sub-header and elements
  auto* u = reinterpret_cast<uint8_t*>(dst);
  u[0] = 0xc9;  // ext 32
  for (int i = 0; i < 4; ++i) u[1 + i] = static_cast<uint8_t>(length >> (8 * (3 - i)));
  u[5] = static_cast<uint8_t>(kRawArrayExtType);
  u[6] = static_cast<uint8_t>(element_size);
  u[7] = static_cast<uint8_t>(kind);
  std::memset(u + 8, 0, kRawArrayHeaderBytes - 8);
}

bool FindRawArray(const char* data, size_t size, RawArray* out) {
  if (size < kRawArrayHeaderBytes) return false;
  const auto* u = reinterpret_cast<const uint8_t*>(data);
  if (u[0] != 0xc9 || static_cast<int8_t>(u[5]) != kRawArrayExtType) return false;
  uint64_t length = 0;
  for (int i = 1; i <= 4; ++i) length = (length << 8) | u[i];
  if (length + 6 != size) return false;  // one value, filling the object exactly
  const size_t element_size = u[6];
  const char kind = static_cast<char>(u[7]);
  if (kind != 'i' && kind != 'u' && kind != 'f') return false;
  if (element_size == 0 || (element_size & (element_size - 1)) != 0 || element_size > 16) return false;
  for (size_t i = 8; i < kRawArrayHeaderBytes; ++i) {
    if (u[i] != 0) return false;
  }
  const size_t bytes = size - kRawArrayHeaderBytes;
  if (bytes % element_size != 0) return false;
  *out = RawArray{data + kRawArrayHeaderBytes, bytes / element_size, element_size, kind};
  return true;
}

std::string RawElementName(size_t element_size, char kind) {
  const char* base = kind == 'f' ? "float" : kind == 'i' ? "int" : "uint";
  return base + std::to_string(element_size * 8);
}

void AdviseHugePages(void* data, size_t size) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (size < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) & ~(kHuge - 1);
  // Advice only: where transparent huge pages are off, nothing changes.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

std::pair<const char*, size_t> PackedBytesOf(const ObjectData& object, const std::string& id) {
  const char* bytes = nullptr;
  size_t length = 0;
  if (!FindPackedBytes(object.data, object.size, &bytes, &length)) {
    char first[8] = {};
    if (object.size > 0) std::snprintf(first, sizeof(first), "0x%02x", static_cast<uint8_t>(object.data[0]));
    throw RayException("ray::GetView of object " + HexId(id) + ": the object (" + std::to_string(object.size) +
                       " bytes" + (object.size > 0 ? std::string(", first ") + first : std::string()) +
                       ") does not hold bytes (it was not made from a std::vector<uint8_t>, "
                       "std::vector<char> or std::string)");
  }
  return {bytes, length};
}

namespace {
// Puts `header` then `size` bytes at `data`, written straight into the store.
std::string PutWithHeader(RayRuntime* runtime, const std::string& header, const void* data, size_t size) {
  SerializedValue value;
  value.size = header.size() + size;
  value.write = [&header, data, size](char* dst) {
    std::memcpy(dst, header.data(), header.size());
    if (size > 0) std::memcpy(dst + header.size(), data, size);
  };
  return runtime->Put(std::move(value));
}
}  // namespace

std::string PutPackedBytes(const void* data, size_t size) {
  if (size > 0xffffffffu) {
    throw RayException("ray::PutBytes: " + std::to_string(size) + " bytes is more than one object holds (4 GiB - 1)");
  }
  if (data == nullptr && size > 0) throw RayException("ray::PutBytes: data is null");
  RayRuntime* runtime = RequireRuntime("ray::PutBytes");
  // The smallest msgpack bin header for `size`, as msgpack's packer writes it.
  std::string header;
  if (size <= 0xff) {
    header = {static_cast<char>(0xc4), static_cast<char>(size)};
  } else if (size <= 0xffff) {
    header = {static_cast<char>(0xc5), static_cast<char>(size >> 8), static_cast<char>(size)};
  } else {
    header = {static_cast<char>(0xc6), static_cast<char>(size >> 24), static_cast<char>(size >> 16),
              static_cast<char>(size >> 8), static_cast<char>(size)};
  }
  return PutWithHeader(runtime, header, data, size);
}

std::string PutRawArray(const void* data, size_t count, size_t element_size, char kind) {
  if (count > kMaxRawArrayBytes / element_size) {
    throw RayException("ray::PutArray: " + std::to_string(count) + " elements of " + std::to_string(element_size) +
                       " bytes are more than one object holds (4 GiB - 11 bytes)");
  }
  if (data == nullptr && count > 0) throw RayException("ray::PutArray: data is null");
  RayRuntime* runtime = RequireRuntime("ray::PutArray");
  std::string header(kRawArrayHeaderBytes, '\0');
  WriteRawArrayHeader(header.data(), count * element_size, element_size, kind);
  return PutWithHeader(runtime, header, data, count * element_size);
}

}  // namespace internal
}  // namespace ray
