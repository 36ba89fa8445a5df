// Serialization of API values: round trips through msgpack, the two-pass
// SerializedValue contract, nested ObjectRefs (collected while packing, registered
// as borrowed while unpacking), and ObjectRef reference counting.
#include <gtest/gtest.h>

#include <any>
#include <cstdint>
#include <cstring>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ray/api.h"
#include "tests/api/fake_runtime.h"

namespace {

using ray::internal::ObjectData;
using ray::internal::SerializedValue;

struct Point {
  int x = 0;
  double y = 0;
  std::string label;
  std::vector<int> tags;
  bool operator==(const Point& o) const { return x == o.x && y == o.y && label == o.label && tags == o.tags; }
  MSGPACK_DEFINE(x, y, label, tags);
};

struct Holder {
  std::string name;
  ray::ObjectRef<int> ref;
  std::vector<ray::ObjectRef<std::string>> more;
  MSGPACK_DEFINE(name, ref, more);
};

std::string Write(const SerializedValue& value) {
  std::string bytes(value.size, '\0');
  value.write(bytes.data());
  return bytes;
}

template <typename T>
T RoundTrip(const T& value, const std::string& outer_id = "") {
  SerializedValue serialized = ray::internal::SerializeBorrowed(value);
  std::string bytes = Write(serialized);
  ObjectData data{bytes.data(), bytes.size(), nullptr, ""};
  return *ray::internal::DecodeShared<T>(data, outer_id, "test");
}

TEST(SerializationTest, StructsAndContainersRoundTrip) {
  Point p{3, 2.5, "hello", {1, 2, 3}};
  EXPECT_EQ(RoundTrip(p), p);
  std::vector<Point> points{p, Point{-1, 0, "", {}}};
  EXPECT_EQ(RoundTrip(points), points);
  std::map<std::string, std::vector<int>> m{{"a", {1}}, {"b", {}}, {"c", {4, 5}}};
  EXPECT_EQ(RoundTrip(m), m);
  std::pair<int, std::string> pr{7, "seven"};
  EXPECT_EQ(RoundTrip(pr), pr);
  std::tuple<int, std::string, double> t{1, "x", 0.5};
  EXPECT_EQ(RoundTrip(t), t);
  std::optional<int> some = 42, none;
  EXPECT_EQ(RoundTrip(some), some);
  EXPECT_EQ(RoundTrip(none), none);
}

// As Ray's serializer: std::any values (Ray's test helpers pass std::vector<std::any>).
TEST(SerializationTest, AnyValuesRoundTripAsTheirMsgpackTypes) {
  std::vector<std::any> in = {1, -2L, 2.5, std::string("text"), true, std::vector<char>{'a', '\0'},
                              std::vector<std::any>{3, std::string("x")},
                              std::map<std::string, std::any>{{"k", 4.5}}, msgpack::type::nil_t()};
  std::vector<std::any> out = RoundTrip(in);
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(std::any_cast<uint64_t>(out[0]), 1u);
  EXPECT_EQ(std::any_cast<int64_t>(out[1]), -2);
  EXPECT_EQ(std::any_cast<double>(out[2]), 2.5);
  EXPECT_EQ(std::any_cast<std::string>(out[3]), "text");
  EXPECT_TRUE(std::any_cast<bool>(out[4]));
  EXPECT_EQ(std::any_cast<std::vector<char>>(out[5]), (std::vector<char>{'a', '\0'}));
  auto nested = std::any_cast<std::vector<std::any>>(out[6]);
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(std::any_cast<std::string>(nested[1]), "x");
  EXPECT_EQ(std::any_cast<double>(std::any_cast<std::map<std::string, std::any>>(out[7]).at("k")), 4.5);
  EXPECT_TRUE(out[8].type() == typeid(msgpack::type::nil_t));
}

TEST(SerializationTest, AnAnyHoldingAnUnsupportedTypeThrowsNamingIt) {
  std::vector<std::any> in = {Point{}};
  try {
    ray::internal::SerializeBorrowed(in);
    FAIL() << "no exception";
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("Point"), std::string::npos) << e.what();
  }
}

TEST(SerializationTest, StringsWithNulsAndBinaryBytes) {
  std::string s("a\0b\0\0c", 6);
  s.push_back(static_cast<char>(0xff));
  EXPECT_EQ(RoundTrip(s), s);
  EXPECT_EQ(RoundTrip(std::string()), std::string());
}

TEST(SerializationTest, LargeStdArrayRoundTrips) {
  auto big = std::make_unique<std::array<int, 100000>>();
  for (int i = 0; i < 100000; ++i) (*big)[i] = i * 7 - 3;
  SerializedValue serialized = ray::internal::SerializeBorrowed(*big);
  std::string bytes = Write(serialized);
  ObjectData data{bytes.data(), bytes.size(), nullptr, ""};
  std::shared_ptr<std::array<int, 100000>> back = ray::internal::DecodeShared<std::array<int, 100000>>(data, "", "t");
  EXPECT_EQ(*back, *big);
}

template <typename T>
std::shared_ptr<T> Decode(const std::string& bytes) {
  ObjectData data{bytes.data(), bytes.size(), nullptr, ""};
  return ray::internal::DecodeShared<T>(data, "", "ray::Get of object x");
}

// The message of the RayException decoding `bytes` as T throws ("" when none).
template <typename T>
std::string DecodeError(const std::string& bytes) {
  try {
    Decode<T>(bytes);
  } catch (const ray::internal::RayException& e) {
    return e.what();
  }
  return "";
}

template <typename E>
void ExpectPackedRaw(const std::vector<E>& value, char kind) {
  std::string bytes = Write(ray::internal::SerializeBorrowed(value));
  ASSERT_EQ(bytes.size(), 16 + value.size() * sizeof(E));
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0xc9);  // msgpack ext 32
  EXPECT_EQ(bytes[5], 0x52);
  EXPECT_EQ(static_cast<size_t>(bytes[6]), sizeof(E));
  EXPECT_EQ(bytes[7], kind);
  EXPECT_EQ(bytes.substr(8, 8), std::string(8, '\0'));
  if (!value.empty()) {
    EXPECT_EQ(std::memcmp(bytes.data() + 16, value.data(), value.size() * sizeof(E)), 0);
  }
  EXPECT_EQ(*Decode<std::vector<E>>(bytes), value);
  // Still one msgpack value (ext type 0x52) to any msgpack reader.
  msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
  ASSERT_EQ(handle.get().type, msgpack::type::EXT);
  EXPECT_EQ(handle.get().via.ext.type(), 0x52);
}

TEST(SerializationTest, VectorsOfNumbersArePackedRawAndRoundTrip) {
  ExpectPackedRaw(std::vector<double>{1.5, -2.25, 1e300, 0.0}, 'f');
  ExpectPackedRaw(std::vector<float>{3.5f, -0.0f}, 'f');
  ExpectPackedRaw(std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX}, 'i');
  ExpectPackedRaw(std::vector<int32_t>{7, -7}, 'i');
  ExpectPackedRaw(std::vector<uint16_t>{0, 65535}, 'u');
  ExpectPackedRaw(std::vector<uint64_t>{UINT64_MAX}, 'u');
  ExpectPackedRaw(std::vector<int8_t>{-128, 127}, 'i');
  ExpectPackedRaw(std::vector<double>{}, 'f');
  // Byte vectors stay msgpack bins; bools and vectors inside other values stay arrays.
  EXPECT_EQ(static_cast<uint8_t>(Write(ray::internal::SerializeBorrowed(std::vector<uint8_t>{1, 2}))[0]), 0xc4);
  EXPECT_EQ(static_cast<uint8_t>(Write(ray::internal::SerializeBorrowed(std::vector<bool>{true}))[0]), 0x91);
  std::vector<std::vector<double>> nested{{1.0}, {2.0, 3.0}};
  EXPECT_EQ(RoundTrip(nested), nested);
  EXPECT_EQ(static_cast<uint8_t>(Write(ray::internal::SerializeBorrowed(nested))[0]), 0x92);
  Point p{1, 2.0, "p", {4, 5, 6}};
  EXPECT_EQ(RoundTrip(p), p);
  // A task argument's bytes (SerializeCopy) are the same.
  std::vector<double> v{1, 2, 3};
  EXPECT_EQ(Write(ray::internal::SerializeCopy(v)), Write(ray::internal::SerializeBorrowed(v)));
}

TEST(SerializationTest, ARawArrayDecodesAsAnotherNumberTypeAsMsgpackWould) {
  std::string ints = Write(ray::internal::SerializeBorrowed(std::vector<int32_t>{1, -2, 300}));
  EXPECT_EQ(*Decode<std::vector<int64_t>>(ints), (std::vector<int64_t>{1, -2, 300}));
  EXPECT_EQ(*Decode<std::vector<double>>(ints), (std::vector<double>{1, -2, 300}));
  // A value that does not fit, or floats for integers, fail naming both types.
  std::string error = DecodeError<std::vector<uint32_t>>(ints);
  EXPECT_NE(error.find("a raw array of int32"), std::string::npos) << error;
  EXPECT_NE(error.find("element 1 does not fit"), std::string::npos) << error;
  EXPECT_NE(DecodeError<std::vector<int8_t>>(ints).find("element 2 does not fit"), std::string::npos);
  std::string floats = Write(ray::internal::SerializeBorrowed(std::vector<double>{0.5}));
  error = DecodeError<std::vector<int>>(floats);
  EXPECT_NE(error.find("a raw array of float64"), std::string::npos) << error;
  EXPECT_NE(error.find("ray::Get of object x"), std::string::npos) << error;
  EXPECT_EQ(*Decode<std::vector<float>>(floats), std::vector<float>{0.5f});
  // Not a vector of numbers at all.
  EXPECT_NE(DecodeError<std::string>(floats).find("do not decode as"), std::string::npos);
}

TEST(SerializationTest, AMsgpackArrayOfNumbersStillDecodes) {
  msgpack::sbuffer packed;
  msgpack::pack(packed, std::vector<double>{1.0, 2.5});
  EXPECT_EQ(*Decode<std::vector<double>>(std::string(packed.data(), packed.size())), (std::vector<double>{1.0, 2.5}));
}

TEST(SerializationTest, MalformedRawArraysAreRejectedWithAClearError) {
  const std::string good = Write(ray::internal::SerializeBorrowed(std::vector<int32_t>{1, 2}));
  std::vector<std::string> bad;
  for (auto [at, byte] : std::vector<std::pair<size_t, char>>{{4, 11}, {6, 3}, {6, 0}, {7, 'x'}, {9, 1}}) {
    bad.push_back(good);
    bad.back()[at] = byte;
  }
  bad.push_back(good.substr(0, 20));  // cut short
  bad.push_back(good + "x");          // a byte past the value
  for (const std::string& bytes : bad) {
    EXPECT_NE(DecodeError<std::vector<int32_t>>(bytes).find("do not decode as"), std::string::npos);
  }
  // An element size that does not divide the bytes.
  std::string odd = Write(ray::internal::SerializeBorrowed(std::vector<int32_t>{1, 2, 3}));
  odd[6] = 8;
  EXPECT_NE(DecodeError<std::vector<int32_t>>(odd).find("do not decode as"), std::string::npos);
}

TEST(SerializationTest, CountingPassSizeEqualsWrittenSize) {
  std::vector<std::string> strings(1000, std::string(333, 'z'));
  SerializedValue serialized = ray::internal::SerializeBorrowed(strings);
  // Write into a bigger buffer with a guard: exactly `size` bytes are written.
  std::string buffer(serialized.size + 16, '#');
  serialized.write(buffer.data());
  EXPECT_EQ(buffer.substr(serialized.size), std::string(16, '#'));
  msgpack::sbuffer reference;
  msgpack::pack(reference, strings);
  EXPECT_EQ(serialized.size, reference.size());
  EXPECT_EQ(buffer.substr(0, serialized.size), std::string(reference.data(), reference.size()));
  // A task argument's bytes are owned: writing works after the value is gone.
  SerializedValue copy;
  {
    std::vector<int> temp{1, 2, 3};
    copy = ray::internal::SerializeCopy(temp);
  }
  EXPECT_EQ(Write(copy), Write(ray::internal::SerializeBorrowed(std::vector<int>{1, 2, 3})));
}

TEST(SerializationTest, WriteThrowsWhenTheValueChangedSize) {
  std::vector<int> v{1, 2, 3};
  SerializedValue serialized = ray::internal::SerializeBorrowed(v);
  v.push_back(4);
  std::string buffer(serialized.size, '\0');
  EXPECT_THROW(serialized.write(buffer.data()), ray::internal::RayException);
}

TEST(SerializationTest, NilIsOneByte) {
  SerializedValue nil = ray::internal::SerializeNil();
  ASSERT_EQ(nil.size, 1u);
  EXPECT_EQ(Write(nil), std::string(1, static_cast<char>(0xc0)));
}

TEST(SerializationTest, DecodingTheWrongTypeThrowsRayException) {
  std::string bytes = Write(ray::internal::SerializeBorrowed(std::string("not a number")));
  ObjectData data{bytes.data(), bytes.size(), nullptr, ""};
  try {
    ray::internal::DecodeShared<int>(data, "", "ray::Get of object x");
    FAIL() << "expected a RayException";
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("do not decode as int"), std::string::npos) << e.what();
  }
}

TEST(SerializationTest, NestedRefsAreCollectedWhilePacking) {
  manta::testing::ScopedFakeRuntime fake;
  ray::ObjectRef<int> a = ray::Put(1);
  ray::ObjectRef<std::string> b = ray::Put(std::string("b"));
  ray::ObjectRef<std::string> c = ray::Put(std::string("c"));
  Holder holder{"h", a, {b, c, ray::ObjectRef<std::string>()}};
  SerializedValue serialized = ray::internal::SerializeBorrowed(holder);
  EXPECT_EQ(serialized.contained_ids, (std::vector<std::string>{a.ID(), b.ID(), c.ID()}));
  // The collector is only active during the counting pass.
  Write(serialized);
  EXPECT_EQ(serialized.contained_ids.size(), 3u);
  // Put hands them to the runtime.
  ray::ObjectRef<Holder> outer = ray::Put(holder);
  EXPECT_EQ(fake->Contained(outer.ID()), (std::vector<std::string>{a.ID(), b.ID(), c.ID()}));
}

TEST(SerializationTest, NestedRefsAreRegisteredAsBorrowedWithOwnerAndOuterId) {
  manta::testing::ScopedFakeRuntime fake;
  ray::ObjectRef<int> inner = ray::Put(5);
  ray::ObjectRef<ray::ObjectRef<int>> outer = ray::Put(inner);
  EXPECT_EQ(fake->Refs(inner.ID()), 1);
  {
    std::shared_ptr<ray::ObjectRef<int>> got = ray::Get(outer);
    EXPECT_EQ(got->ID(), inner.ID());
    EXPECT_EQ(fake->Refs(inner.ID()), 2);  // the deserialized ref holds one
    ASSERT_EQ(fake->Borrowed().size(), 1u);
    EXPECT_EQ(fake->Borrowed()[0], std::make_tuple(inner.ID(), "owner-of-" + inner.ID(), outer.ID()));
    EXPECT_EQ(*ray::Get(*got), 5);
  }
  EXPECT_EQ(fake->Refs(inner.ID()), 1);
  // Refs in a value decoded outside ray::Get have no outer object.
  std::vector<ray::ObjectRef<int>> refs{inner, inner};
  std::vector<ray::ObjectRef<int>> back = RoundTrip(refs);
  EXPECT_EQ(back[1].ID(), inner.ID());
  EXPECT_EQ(std::get<2>(fake->Borrowed().back()), "");
}

TEST(SerializationTest, RefsInsideStructsRoundTrip) {
  manta::testing::ScopedFakeRuntime fake;
  Holder holder{"h", ray::Put(1), {ray::Put(std::string("x"))}};
  ray::ObjectRef<Holder> outer = ray::Put(holder);
  std::shared_ptr<Holder> back = ray::Get(outer);
  EXPECT_EQ(back->name, "h");
  EXPECT_EQ(back->ref.ID(), holder.ref.ID());
  ASSERT_EQ(back->more.size(), 1u);
  EXPECT_EQ(*ray::Get(back->more[0]), "x");
  EXPECT_EQ(*back->ref.Get(), 1);
}

TEST(ObjectRefTest, CopiesAddMovesStealAndDestructorsRemove) {
  manta::testing::ScopedFakeRuntime fake;
  std::string id;
  {
    ray::ObjectRef<int> a = ray::Put(1);  // adopts the reference Put returned
    id = a.ID();
    EXPECT_EQ(id.size(), 28u);
    EXPECT_EQ(fake->Refs(id), 1);
    ray::ObjectRef<int> b = a;
    EXPECT_EQ(fake->Refs(id), 2);
    ray::ObjectRef<int> c = std::move(b);
    EXPECT_EQ(fake->Refs(id), 2);
    EXPECT_TRUE(b.IsNil());
    ray::ObjectRef<int> d(id);  // from an id: takes a reference
    EXPECT_EQ(fake->Refs(id), 3);
    d = c;
    EXPECT_EQ(fake->Refs(id), 3);
    d = ray::ObjectRef<int>();
    EXPECT_EQ(fake->Refs(id), 2);
    EXPECT_TRUE(a == c);
  }
  EXPECT_EQ(fake->Refs(id), 0);
}

TEST(ObjectRefTest, RefsOutlivingShutdownAreInert) {
  auto survivor = std::make_unique<ray::ObjectRef<int>>();
  {
    manta::testing::ScopedFakeRuntime fake;
    *survivor = ray::Put(3);
  }
  // A new runtime must not see the old ref's release.
  manta::testing::ScopedFakeRuntime fake;
  ray::ObjectRef<int> fresh = ray::Put(4);
  EXPECT_EQ(fresh.ID(), survivor->ID());  // the fake reuses ids: same id, other epoch
  survivor.reset();
  EXPECT_EQ(fake->Refs(fresh.ID()), 1);
}

TEST(ObjectRefTest, UseWithoutRuntimeThrows) {
  EXPECT_THROW(ray::Put(1), ray::internal::RayException);
  ray::ObjectRef<int> ref(std::string(28, 'x'));  // no runtime: no reference taken
  EXPECT_THROW(ref.Get(), ray::internal::RayException);
  EXPECT_FALSE(ray::IsInitialized());
}

}  // namespace
