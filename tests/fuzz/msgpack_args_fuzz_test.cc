// Randomized tests of how a worker decodes msgpack task arguments and how a caller
// decodes return values (include/ray/api/serializer.h, function_manager.h,
// src/api/serializer.cc): registered remote functions invoked the way the executor
// invokes them, with random bytes, mutated and truncated valid encodings, containers
// declaring more elements than there are bytes, and deep nesting. Every input must
// either decode or throw RayException; never crash, throw anything else, or reserve
// memory out of proportion to the bytes (the cap of fuzz_util.h); and every valid
// encoding must come back byte for byte from an echo function.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ray/api.h"
#include "tests/api/fake_runtime.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using ray::internal::ObjectData;
using ray::internal::RayException;
using ray::internal::SerializedValue;

struct Point {
  int32_t x = 0;
  double y = 0;
  std::string label;
  std::vector<int64_t> tags;
  MSGPACK_DEFINE(x, y, label, tags);
};

using Nested = std::vector<std::vector<std::vector<int32_t>>>;
using Table = std::map<std::string, std::vector<double>>;
using Row = std::tuple<int64_t, std::string, bool, std::vector<uint8_t>>;

int64_t EchoInt(int64_t v) { return v; }
std::string EchoString(std::string s) { return s; }
std::vector<int64_t> EchoVector(std::vector<int64_t> v) { return v; }
Table EchoTable(Table t) { return t; }
Row EchoRow(Row r) { return r; }
Point EchoPoint(Point p) { return p; }
Nested EchoNested(Nested n) { return n; }
std::array<int16_t, 3> EchoArray(std::array<int16_t, 3> a) { return a; }
std::string RefId(ray::ObjectRef<int> ref) { return ref.ID(); }
std::string Describe(std::string a, int64_t b, std::vector<std::string> c) {
  return a + ":" + std::to_string(b) + ":" + std::to_string(c.size());
}

RAY_REMOTE(EchoInt, EchoString, EchoVector, EchoTable, EchoRow, EchoPoint, EchoNested, EchoArray, RefId, Describe);

std::string Write(const SerializedValue& value) {
  std::string bytes(value.size, '\0');
  value.write(bytes.data());
  return bytes;
}

// As a caller packs an argument (a vector of numbers raw, see serializer.h).
template <typename T>
std::string Pack(const T& value) {
  return Write(ray::internal::SerializeCopy(value));
}
// As msgpack alone packs it (a vector of numbers as an array, which decodes too).
template <typename T>
std::string PackAsMsgpack(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

// Random values of the argument types (sizes kept small: the decoder's cost is per byte).
struct Values {
  std::mt19937_64& rng;
  std::string Text() { return manta::fuzz::RandomBytes(rng, 40); }
  int64_t Int() {
    return manta::fuzz::OneIn(rng, 3) ? static_cast<int64_t>(manta::fuzz::BoundaryValue(rng, 127))
                                      : static_cast<int64_t>(rng()) >> manta::fuzz::Uniform(rng, 0, 63);
  }
  double Real() {
    switch (manta::fuzz::Uniform(rng, 0, 3)) {
      case 0:
        return std::numeric_limits<double>::infinity();
      case 1:
        return -0.0;
      default:
        return static_cast<double>(Int()) / 7.0;
    }
  }
  size_t Count(size_t max) { return manta::fuzz::Uniform(rng, 0, max); }
  std::vector<int64_t> Ints() {
    std::vector<int64_t> v(Count(20));
    for (auto& x : v) x = Int();
    return v;
  }
  Table MakeTable() {
    Table t;
    for (size_t i = Count(5); i > 0; --i) {
      std::vector<double>& column = t[Text()];
      for (size_t k = Count(5); k > 0; --k) column.push_back(Real());
    }
    return t;
  }
  Row MakeRow() {
    std::vector<uint8_t> blob(Count(16));
    for (auto& b : blob) b = static_cast<uint8_t>(rng());
    return {Int(), Text(), manta::fuzz::OneIn(rng, 2), blob};
  }
  Point MakePoint() { return {static_cast<int32_t>(rng()), Real(), Text(), Ints()}; }
  Nested MakeNested() {
    Nested n(Count(4));
    for (auto& a : n) {
      a.resize(Count(4));
      for (auto& b : a) {
        b.resize(Count(4));
        for (auto& c : b) c = static_cast<int32_t>(rng());
      }
    }
    return n;
  }
};

// One registered function: its name and a maker of valid argument encodings.
struct Target {
  const char* name;
  size_t num_args;
  std::function<std::vector<std::string>(Values&)> valid_args;
  bool echoes;  // returns its only argument: the result's bytes are the argument's
};

std::vector<Target> Targets() {
  return {
      {"EchoInt", 1, [](Values& v) { return std::vector<std::string>{Pack(v.Int())}; }, true},
      {"EchoString", 1, [](Values& v) { return std::vector<std::string>{Pack(v.Text())}; }, true},
      {"EchoVector", 1, [](Values& v) { return std::vector<std::string>{Pack(v.Ints())}; }, true},
      {"EchoVector", 1, [](Values& v) { return std::vector<std::string>{PackAsMsgpack(v.Ints())}; }, false},
      {"EchoTable", 1, [](Values& v) { return std::vector<std::string>{Pack(v.MakeTable())}; }, true},
      {"EchoRow", 1, [](Values& v) { return std::vector<std::string>{Pack(v.MakeRow())}; }, true},
      {"EchoPoint", 1, [](Values& v) { return std::vector<std::string>{Pack(v.MakePoint())}; }, true},
      {"EchoNested", 1, [](Values& v) { return std::vector<std::string>{Pack(v.MakeNested())}; }, true},
      {"EchoArray", 1,
       [](Values& v) {
         return std::vector<std::string>{Pack(std::array<int16_t, 3>{static_cast<int16_t>(v.rng()),
                                                                    static_cast<int16_t>(v.rng()), 0})};
       },
       true},
      {"RefId", 1,
       [](Values& v) {
         // The wire form of a ref: [bin id, bin owner address].
         msgpack::sbuffer buffer;
         msgpack::packer<msgpack::sbuffer> packer(buffer);
         const std::string id = v.Text() + "r";  // never nil
         packer.pack_array(2);
         packer.pack_bin(static_cast<uint32_t>(id.size()));
         packer.pack_bin_body(id.data(), static_cast<uint32_t>(id.size()));
         packer.pack_bin(4);
         packer.pack_bin_body("addr", 4);
         return std::vector<std::string>{std::string(buffer.data(), buffer.size())};
       },
       false},
      {"Describe", 3,
       [](Values& v) {
         std::vector<std::string> c(v.Count(3), "c");
         return std::vector<std::string>{Pack(v.Text()), Pack(v.Int()), Pack(c)};
       },
       false},
  };
}

// The outcome of one call: decoded (with the result's bytes) or refused.
struct Outcome {
  bool decoded = false;
  std::string result;
  std::string error;
};

// Invokes `name` as the executor does, with `args` as the argument bytes, under an
// allocation cap proportional to them. Anything but a value or RayException fails.
Outcome Invoke(const std::string& name, const std::vector<std::string>& args) {
  const ray::internal::RemoteFunction* function = ray::internal::FunctionManager::Instance().GetFunction(name);
  EXPECT_NE(function, nullptr) << name;
  Outcome out;
  if (function == nullptr) return out;
  std::vector<ObjectData> data;
  size_t bytes = 0;
  for (const std::string& a : args) {
    data.push_back({a.data(), a.size(), nullptr, ""});
    bytes += a.size();
  }
  manta::fuzz::AllocationCap cap(64 * bytes + (1 << 20));
  try {
    SerializedValue result = (*function)(data);
    out.result = Write(result);
    out.decoded = true;
  } catch (const RayException& e) {
    out.error = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << " threw a " << typeid(e).name() << " instead of RayException: " << e.what();
  }
  EXPECT_EQ(cap.refused(), 0) << name << " asked for " << cap.largest_request() << " bytes at once for "
                              << bytes << " bytes of arguments";
  return out;
}

// Decodes `bytes` as a T the way ray::Get does, under the same cap. True if it decoded.
template <typename T>
bool DecodeReturn(const std::string& bytes) {
  manta::fuzz::AllocationCap cap(64 * bytes.size() + (1 << 20));
  bool decoded = false;
  try {
    ObjectData object{bytes.data(), bytes.size(), nullptr, ""};
    decoded = ray::internal::DecodeShared<T>(object, "", "ray::Get") != nullptr;
  } catch (const RayException&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "decoding a " << typeid(T).name() << " threw " << e.what() << " instead of RayException";
  }
  EXPECT_EQ(cap.refused(), 0) << "asked for " << cap.largest_request() << " bytes at once for " << bytes.size();
  return decoded;
}

// The return-value side: the same bytes read back as every type.
void DecodeAsEveryType(const std::string& bytes) {
  DecodeReturn<int64_t>(bytes);
  DecodeReturn<std::string>(bytes);
  DecodeReturn<std::vector<int64_t>>(bytes);
  DecodeReturn<Table>(bytes);
  DecodeReturn<Row>(bytes);
  DecodeReturn<Point>(bytes);
  DecodeReturn<Nested>(bytes);
  DecodeReturn<std::array<int16_t, 3>>(bytes);
  DecodeReturn<ray::ObjectRef<int>>(bytes);
}

class MsgpackArgsFuzzTest : public ::testing::Test {
 protected:
  manta::testing::ScopedFakeRuntime runtime_;  // ObjectRef arguments register with it
};

TEST_F(MsgpackArgsFuzzTest, RandomMutatedAndTruncatedArguments) {
  const int64_t iterations = manta::fuzz::Iterations(20000);
  std::mt19937_64 rng = manta::fuzz::TestRng(iterations);
  Values values{rng};
  const std::vector<Target> targets = Targets();
  int round_trips = 0;
  for (int64_t i = 0; i < iterations && !HasFailure(); ++i) {
    const Target& target = targets[manta::fuzz::Uniform(rng, 0, targets.size() - 1)];
    const std::vector<std::string> valid = target.valid_args(values);
    const std::vector<std::string> donor = targets[manta::fuzz::Uniform(rng, 0, targets.size() - 1)].valid_args(values);
    std::vector<std::string> args = valid;
    const uint64_t mode = manta::fuzz::Uniform(rng, 0, 9);
    const size_t k = manta::fuzz::Uniform(rng, 0, args.size() - 1);
    bool truncated = false;
    switch (mode) {
      case 0:  // random bytes
        args[k] = manta::fuzz::RandomBytes(rng, 256);
        break;
      case 1:  // a strict prefix: msgpack is prefix-free, so this can never decode
        args[k].resize(manta::fuzz::Uniform(rng, 0, args[k].size() - 1));
        truncated = true;
        break;
      case 2:  // a wrong number of arguments
        args.resize(manta::fuzz::Uniform(rng, 0, 4), donor[0]);
        if (args.size() == target.num_args) args.push_back(donor[0]);
        break;
      case 3:  // another type's encoding
        args[k] = donor[0];
        break;
      case 4:
      case 5:
      case 6:
        args[k] = manta::fuzz::Mutate(rng, args[k], donor[0]);
        break;
      default:  // unchanged
        break;
    }
    SCOPED_TRACE("iteration " + std::to_string(i) + " " + target.name + " mode " + std::to_string(mode) +
                 " argument " + manta::fuzz::Hex(args.empty() ? "" : args[std::min(k, args.size() - 1)]));
    const Outcome out = Invoke(target.name, args);
    if (truncated || mode == 2) {
      EXPECT_FALSE(out.decoded) << "decoded a truncated value or a wrong count";
    }
    if (mode >= 7) {
      ASSERT_TRUE(out.decoded) << out.error;
      if (target.echoes) {
        EXPECT_TRUE(out.result == valid[0]) << "not the same bytes back: " << manta::fuzz::Hex(out.result);
        ++round_trips;
      }
    }
    if (mode == 0 || mode >= 4) DecodeAsEveryType(args[k]);
  }
  EXPECT_GT(round_trips, 0);
}

TEST_F(MsgpackArgsFuzzTest, ContainersDeclaringMoreThanTheBytesHoldAreRefusedCheaply) {
  auto bytes = [](std::initializer_list<int> list) {
    std::string out;
    for (int b : list) out.push_back(static_cast<char>(b));
    return out;
  };
  std::vector<std::string> inputs = {
      bytes({0xdd, 0xff, 0xff, 0xff, 0xff}),                // array32 of 2^32 - 1
      bytes({0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01, 0x02}),    // array32 of 2^31 - 1, two elements
      bytes({0xdc, 0xff, 0xff}),                            // array16 of 65535
      bytes({0xdf, 0xff, 0xff, 0xff, 0xff}),                // map32 of 2^32 - 1 pairs
      bytes({0xde, 0xff, 0xff, 0x01}),                      // map16
      bytes({0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}),           // str32
      bytes({0xc6, 0xff, 0xff, 0xff, 0xff, 'a'}),           // bin32
      bytes({0xc9, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}),     // ext32
      bytes({0x94, 0xdd, 0x00, 0x10, 0x00, 0x00, 0x01}),    // a small array holding a large one
  };
  // Nested headers, each declaring a million elements: msgpack reserves room for a
  // container's elements when it reads its header, so these would add up.
  std::string nested;
  for (int i = 0; i < 4000; ++i) nested += bytes({0xdd, 0x00, 0x10, 0x00, 0x00});
  inputs.push_back(nested);
  std::string nested_maps;
  for (int i = 0; i < 4000; ++i) nested_maps += bytes({0xdf, 0x00, 0x10, 0x00, 0x00, 0x01});
  inputs.push_back(nested_maps);
  for (const std::string& input : inputs) {
    SCOPED_TRACE(manta::fuzz::Hex(input, 16));
    for (const Target& target : Targets()) {
      std::vector<std::string> args(target.num_args, input);
      EXPECT_FALSE(Invoke(target.name, args).decoded) << target.name;
    }
    DecodeAsEveryType(input);
  }
}

TEST_F(MsgpackArgsFuzzTest, DeepNestingIsAnErrorNotACrash) {
  // 200,000 nested one-element arrays around an integer: no recursion may follow the
  // depth of the bytes (that many frames would overflow the stack).
  std::string deep(200000, static_cast<char>(0x91));
  deep.push_back(0x01);
  for (const Target& target : Targets()) {
    std::vector<std::string> args(target.num_args, deep);
    EXPECT_FALSE(Invoke(target.name, args).decoded) << target.name;
  }
  DecodeAsEveryType(deep);
  // As deep as the type goes is fine.
  const Outcome out = Invoke("EchoNested", {Pack(Nested{{{1, 2}, {}}, {}})});
  ASSERT_TRUE(out.decoded) << out.error;
  EXPECT_EQ(out.result, Pack(Nested{{{1, 2}, {}}, {}}));
}

TEST_F(MsgpackArgsFuzzTest, EveryPrefixOfAValidEncodingIsRefused) {
  std::mt19937_64 rng(1);
  Values values{rng};
  for (const Target& target : Targets()) {
    for (int round = 0; round < 5; ++round) {
      const std::vector<std::string> valid = target.valid_args(values);
      for (size_t length = 0; length < valid[0].size(); ++length) {
        std::vector<std::string> args = valid;
        args[0].resize(length);
        EXPECT_FALSE(Invoke(target.name, args).decoded) << target.name << " prefix " << length;
      }
      EXPECT_TRUE(Invoke(target.name, valid).decoded) << target.name;
    }
  }
}

}  // namespace
