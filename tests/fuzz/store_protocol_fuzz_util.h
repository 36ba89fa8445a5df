// Helpers shared by the randomized tests of the object store protocol
// (store_protocol_fuzz_test.cc, store_client_fuzz_test.cc): the store's framing,
// applied and undone independently of its code, and valid requests about a few ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protos/object_store.pb.h"
#include "src/common/id.h"
#include "src/object_store/store_server.h"
#include "tests/fuzz/fuzz_util.h"

namespace manta::object_store {

// The arena of the stores under test (real or fake), and how long any exchange may take.
inline constexpr int64_t kCapacity = 1 << 20;
inline constexpr int64_t kDeadlineMs = 5000;
// The largest request frame the store server reads.
inline constexpr uint32_t kLimit = StoreServer::kMaxFrameBytes;

// `body` behind its u32 LE length, as the store frames its messages.
inline std::string Framed(std::string_view body) {
  std::string out(4, '\0');
  fuzz::PutLe(&out, 0, 4, body.size());
  out.append(body);
  return out;
}
inline std::string Framed(const google::protobuf::MessageLite& message) { return Framed(message.SerializeAsString()); }

// The store's framing ([u32 LE length][message]) applied to a whole byte string:
// complete frames, until one declares more than `limit` bytes or the bytes run out.
struct Frames {
  std::vector<std::string> bodies;
  bool over_limit = false;
  size_t partial_bytes = 0;  // after the last complete frame
};
inline Frames SplitFrames(std::string_view bytes, uint64_t limit) {
  Frames out;
  size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    uint64_t n = 0;
    for (int i = 0; i < 4; ++i) n |= uint64_t{static_cast<uint8_t>(bytes[pos + i])} << (8 * i);
    if (n > limit) {
      out.over_limit = true;
      return out;
    }
    if (bytes.size() - pos - 4 < n) break;
    out.bodies.emplace_back(bytes.substr(pos + 4, n));
    pos += 4 + n;
  }
  out.partial_bytes = bytes.size() - pos;
  return out;
}

// Valid requests with the real encoder, about a few ids (so that Create, Seal, Get
// and Release meet), with sizes and timeouts that are sometimes at the boundaries.
class RequestMaker {
 public:
  explicit RequestMaker(std::mt19937_64& rng) : rng_(rng) {
    for (int i = 0; i < 4; ++i) ids_.push_back(RandomId());
  }
  std::string RandomId() {
    std::string id(ObjectID::kSize, '\0');
    for (char& c : id) c = static_cast<char>(rng_());
    return id;
  }
  std::string Id() {
    if (fuzz::OneIn(rng_, 20)) {
      made_malformed_id_ = true;  // the server closes a connection over it
      return fuzz::RandomBytes(rng_, 40);
    }
    return ids_[fuzz::Uniform(rng_, 0, ids_.size() - 1)];
  }
  // Whether an id of the wrong size was made since the last call.
  bool TakeMadeMalformedId() { return std::exchange(made_malformed_id_, false); }
  int64_t Size() {
    if (fuzz::OneIn(rng_, 4)) return static_cast<int64_t>(fuzz::BoundaryValue(rng_, kCapacity));
    return static_cast<int64_t>(fuzz::Uniform(rng_, 0, 4096));
  }
  int64_t TimeoutMs() {
    switch (fuzz::Uniform(rng_, 0, 5)) {
      case 0:
        return -1;
      case 1:
        return static_cast<int64_t>(fuzz::BoundaryValue(rng_, 1000));
      case 2:
        return static_cast<int64_t>(fuzz::Uniform(rng_, 1, 5));
      default:
        return 0;
    }
  }
  rpc::StoreRequest Connect(uint64_t request_id = 0) {
    rpc::StoreRequest r;
    r.set_request_id(request_id);
    r.mutable_connect()->set_pid(static_cast<int32_t>(rng_()));
    r.mutable_connect()->set_name("fuzz");
    return r;
  }
  rpc::StoreRequest Next() {
    rpc::StoreRequest r;
    r.set_request_id(fuzz::OneIn(rng_, 8) ? fuzz::BoundaryValue(rng_, 0) : rng_() >> 8);
    switch (fuzz::Uniform(rng_, 0, 7)) {
      case 0: {
        auto* q = r.mutable_create();
        q->set_object_id(Id());
        q->set_data_size(Size());
        q->set_metadata_size(fuzz::OneIn(rng_, 2) ? 0 : Size());
        q->set_pin_on_seal(fuzz::OneIn(rng_, 2));
        break;
      }
      case 1:
        r.mutable_seal()->set_object_id(Id());
        r.mutable_seal()->set_release(fuzz::OneIn(rng_, 2));
        r.set_no_reply(fuzz::OneIn(rng_, 2));
        break;
      case 2:
        r.mutable_release()->set_object_id(Id());
        r.set_no_reply(fuzz::OneIn(rng_, 2));
        break;
      case 3: {
        const int n = static_cast<int>(fuzz::Uniform(rng_, 0, 5));
        for (int i = 0; i < n; ++i) r.mutable_get()->add_object_ids(Id());
        r.mutable_get()->set_timeout_ms(TimeoutMs());
        break;
      }
      case 4:
        r.mutable_contains()->set_object_id(Id());
        break;
      case 5: {
        const int n = static_cast<int>(fuzz::Uniform(rng_, 0, 5));
        r.mutable_delete_();  // set even when it lists no id
        for (int i = 0; i < n; ++i) r.mutable_delete_()->add_object_ids(Id());
        r.set_no_reply(fuzz::OneIn(rng_, 2));
        break;
      }
      case 6:
        r.mutable_abort()->set_object_id(Id());
        break;
      default:
        r = Connect();
        break;
    }
    return r;
  }

 private:
  std::mt19937_64& rng_;
  std::vector<std::string> ids_;
  bool made_malformed_id_ = false;
};

}  // namespace manta::object_store
