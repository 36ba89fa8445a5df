// Randomized tests of how a raylet accepts a pulled object's chunks
// (src/raylet/object_manager.cc: PullReactor and its ChunkParser). The real
// ObjectManager pulls from a scripted sender (a generic gRPC service on loopback)
// into a real ObjectStore over a patterned arena with a guard zone past its end.
// Streams are random, mutated, or hand-made: sizes and offsets near INT64_MAX, out of
// range, overlapping, repeated data fields, zero-length chunks, early ends. No stream
// may crash the raylet, write outside the object's allocation, allocate for sizes the
// store cannot hold, or make a pull succeed with bytes the protocol does not put there
// (protos/object_manager.proto: the first chunk carries the sizes, chunks arrive in
// order); and every valid stream must arrive exactly.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "protos/object_manager.pb.h"
#include "src/common/util.h"
#include "src/object_store/allocator.h"
#include "src/object_store/object_store.h"
#include "src/raylet/object_manager.h"
#include "tests/fuzz/fuzz_util.h"

namespace manta::raylet {
namespace {

using object_store::Allocator;
using object_store::ObjectLocation;
using object_store::ObjectStore;

constexpr int64_t kCapacity = 256 << 10;
constexpr int64_t kGuardBytes = 64 << 10;
constexpr uint8_t kPattern = 0xa5;
constexpr int64_t kDeadlineMs = 10000;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr object_store::ClientId kReader = 1;

// What the sender streams for one pull: raw ObjectChunk messages, then a status.
struct Script {
  std::vector<std::string> messages;
  grpc::Status status = grpc::Status::OK;
};

// One PullObject stream, played from a script; `done` runs when it is over.
class ScriptedStream : public grpc::ServerGenericBidiReactor {
 public:
  ScriptedStream(Script script, std::function<void()> done) : script_(std::move(script)), done_(std::move(done)) {
    StartRead(&request_);
  }
  void OnReadDone(bool /*ok*/) override { WriteNext(); }  // the request (or its absence)
  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::CANCELLED);  // the puller gave up
    WriteNext();
  }
  void OnDone() override {
    done_();
    delete this;
  }

 private:
  void WriteNext() {
    if (next_ == script_.messages.size()) return Finish(script_.status);
    grpc::Slice slice(script_.messages[next_++]);
    message_ = grpc::ByteBuffer(&slice, 1);
    StartWrite(&message_);
  }
  Script script_;
  std::function<void()> done_;
  size_t next_ = 0;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer message_;
};

// The other raylet: answers every PullObject with the script set last.
class ScriptedSender : public grpc::CallbackGenericService {
 public:
  void Set(Script script) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(script);
  }
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override {
    std::lock_guard<std::mutex> lock(mu_);
    Script script = script_;
    if (context->method() != "/manta.rpc.ObjectManagerService/PullObject") {
      script = {{}, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, context->method())};
    }
    return new ScriptedStream(std::move(script), [this] {
      std::lock_guard<std::mutex> lock(mu_);
      ++streams_done_;
      cv_.notify_all();
    });
  }
  // Waits (up to the deadline) until `n` streams have ended on this side.
  bool WaitForStreamsDone(int64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(kDeadlineMs), [&] { return streams_done_ >= n; });
  }
  int64_t streams_done() {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_done_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Script script_;
  int64_t streams_done_ = 0;
};

rpc::ObjectChunk Chunk(int64_t data_size, int64_t metadata_size, int64_t offset, std::string data) {
  rpc::ObjectChunk chunk;
  chunk.set_data_size(data_size);
  chunk.set_metadata_size(metadata_size);
  chunk.set_offset(offset);
  chunk.set_data(std::move(data));
  return chunk;
}

// A valid stream for `content` (data then metadata bytes), cut like the real sender
// does (every chunk carries the sizes), in random pieces, some of them empty.
std::vector<rpc::ObjectChunk> ValidChunks(std::mt19937_64& rng, const std::string& content, int64_t metadata_size) {
  const int64_t total = static_cast<int64_t>(content.size());
  const int64_t data_size = total - metadata_size;
  std::vector<rpc::ObjectChunk> chunks;
  int64_t sent = 0;
  do {
    int64_t n = std::min<int64_t>(total - sent, static_cast<int64_t>(fuzz::Uniform(rng, 0, 4096)));
    if (fuzz::OneIn(rng, 8)) n = 0;
    chunks.push_back(Chunk(data_size, metadata_size, sent, content.substr(sent, n)));
    sent += n;
  } while (sent < total);
  return chunks;
}

// What the protocol makes of a stream (object_manager.proto): the first chunk's sizes,
// then data at offsets that follow on from each other, all of it within the object,
// and a stream that ends well. kUnknown when a message is not an ObjectChunk protobuf
// can parse (the puller's parser may or may not take it; only safety is checked then).
struct Expected {
  enum { kAccept, kReject, kUnknown } verdict = kReject;
  bool canonical = true;  // every message is exactly what protobuf would write
  std::string content;
  int64_t data_size = 0;
  int64_t metadata_size = 0;
};
Expected Expect(const Script& script, int64_t capacity) {
  Expected out;
  std::vector<rpc::ObjectChunk> chunks;
  for (const std::string& m : script.messages) {
    rpc::ObjectChunk chunk;
    if (!chunk.ParseFromString(m)) {
      out.verdict = Expected::kUnknown;
      out.canonical = false;
      return out;
    }
    out.canonical &= chunk.SerializeAsString() == m;
    chunks.push_back(std::move(chunk));
  }
  if (chunks.empty() || !script.status.ok()) return out;
  out.data_size = chunks[0].data_size();
  out.metadata_size = chunks[0].metadata_size();
  int64_t total = 0;
  if (!CheckedAdd(out.data_size, out.metadata_size, &total) || Allocator::RoundUp(total) > capacity) return out;
  for (const rpc::ObjectChunk& c : chunks) {
    const int64_t received = static_cast<int64_t>(out.content.size());
    if (c.offset() != received || static_cast<int64_t>(c.data().size()) > total - received) return out;
    out.content += c.data();
  }
  if (static_cast<int64_t>(out.content.size()) == total) out.verdict = Expected::kAccept;
  return out;
}

class ObjectChunkFuzzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_.assign(kCapacity + kGuardBytes, kPattern);
    object_store::ObjectStoreOptions options;
    options.on_allocate = [this](int64_t offset, int64_t size) { allocation_end_ = offset + size; };
    store_ = std::make_unique<ObjectStore>(loop_, kCapacity, options, nullptr, memory_.data());
    ObjectManagerOptions om_options;
    om_options.chunk_bytes = 64 << 10;
    om_options.pull_timeout_ms = kDeadlineMs;
    manager_ = std::make_unique<ObjectManager>(loop_, *store_, om_options);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(&sender_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    loop_thread_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now());
    OnLoop([this] {
      manager_.reset();
      return 0;
    });
    loop_.Stop();
    loop_thread_.join();
    store_.reset();
  }

  // Runs `fn` on the loop thread and returns its result.
  template <typename F>
  auto OnLoop(F fn) -> decltype(fn()) {
    using T = decltype(fn());
    auto promise = std::make_shared<std::promise<T>>();
    std::future<T> future = promise->get_future();
    loop_.Post("ObjectChunkFuzzTest.OnLoop", [promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); });
    if (future.wait_for(std::chrono::milliseconds(kDeadlineMs)) != std::future_status::ready) {
      // The loop still holds `fn` and its references: nothing safe is left to do.
      std::fprintf(stderr, "the loop did not answer within %lld ms\n", static_cast<long long>(kDeadlineMs));
      std::abort();
    }
    return future.get();
  }

  struct Pulled {
    absl::Status status;
    std::optional<ObjectLocation> location;  // when the object is in the store afterwards
    std::string bytes;                       // its data and metadata
  };

  // Pulls a new object from the sender playing `script`; checks that the callback
  // runs once, that nothing outside the object's allocation changed, and that the
  // store and manager are empty again afterwards.
  Pulled Pull(std::mt19937_64& rng, Script script, bool hold_loop_until_sent = false) {
    std::string binary(ObjectID::kSize, '\0');
    for (char& c : binary) c = static_cast<char>(rng());
    const ObjectID id = ObjectID::FromBinary(binary);
    sender_.Set(std::move(script));
    OnLoop([this] {
      std::memset(memory_.data(), kPattern, memory_.size());
      allocation_end_ = -1;
      return 0;
    });
    auto done = std::make_shared<std::promise<absl::Status>>();
    auto calls = std::make_shared<std::atomic<int>>(0);
    std::future<absl::Status> result = done->get_future();
    // Counted before the pull starts: its stream may be over before the next line runs.
    const int64_t streams_before = sender_.streams_done();
    loop_.Post("ObjectChunkFuzzTest.Pull", [this, id, done, calls] {
      manager_->Pull(id, {address_}, [done, calls](const absl::Status& s) {
        if (calls->fetch_add(1) == 0) done->set_value(s);
      });
    });
    if (hold_loop_until_sent) {
      // The loop is busy until the sender has finished the whole stream: the
      // puller's handling of the first chunk comes after the stream's end.
      loop_.Post("ObjectChunkFuzzTest.Busy", [this, n = streams_before + 1] {
        EXPECT_TRUE(sender_.WaitForStreamsDone(n));
      });
    }
    Pulled out;
    if (result.wait_for(std::chrono::milliseconds(kDeadlineMs)) != std::future_status::ready) {
      std::fprintf(stderr, "the pull neither finished nor failed within %lld ms\n",
                   static_cast<long long>(kDeadlineMs));
      std::abort();
    }
    out.status = result.get();
    OnLoop([&] {
      EXPECT_EQ(calls->load(), 1) << "the pull's callback ran more than once";
      EXPECT_EQ(manager_->num_active_pulls(), 0);
      // The store's only allocation (it is empty between pulls) starts at 0.
      const int64_t allocated = allocation_end_ < 0 ? 0 : Allocator::RoundUp(allocation_end_);
      for (int64_t i = allocated; i < static_cast<int64_t>(memory_.size()); ++i) {
        if (memory_[i] != kPattern) {
          ADD_FAILURE() << "byte " << i << " changed, outside the allocation [0, " << allocated << ")"
                        << (i >= kCapacity ? ", past the end of the arena" : "");
          break;
        }
      }
      store_->Get(kReader, {id}, 0, [&](std::vector<std::optional<ObjectLocation>> got) { out.location = got[0]; });
      if (out.location) {
        EXPECT_EQ(out.location->offset, 0);
        out.bytes.assign(reinterpret_cast<const char*>(memory_.data()) + out.location->offset,
                         static_cast<size_t>(out.location->data_size + out.location->metadata_size));
      }
      store_->DisconnectClient(kReader);
      store_->Delete({id});
      object_store::ObjectStoreStats stats = store_->Stats();
      EXPECT_EQ(stats.used_bytes, 0);
      EXPECT_EQ(stats.num_objects, 0);
      EXPECT_EQ(stats.num_pending_creates, 0);
      return 0;
    });
    return out;
  }

  // Pulls with `script` and checks the outcome against the protocol.
  void PullAndCheck(std::mt19937_64& rng, const Script& script) {
    const Expected expected = Expect(script, kCapacity);
    const Pulled pulled = Pull(rng, script);
    EXPECT_EQ(pulled.status.ok(), pulled.location.has_value()) << pulled.status;
    if (pulled.status.ok()) {
      ASSERT_NE(expected.verdict, Expected::kReject)
          << "a pull succeeded with a stream the protocol refuses: it made an object of "
          << pulled.location->data_size << " + " << pulled.location->metadata_size << " bytes";
      if (expected.verdict == Expected::kAccept) {
        EXPECT_EQ(pulled.location->data_size, expected.data_size);
        EXPECT_EQ(pulled.location->metadata_size, expected.metadata_size);
        EXPECT_TRUE(pulled.bytes == expected.content) << "the object's bytes are not the ones sent";
      }
    } else if (expected.verdict == Expected::kAccept && expected.canonical) {
      ADD_FAILURE() << "a valid stream failed: " << pulled.status;
    }
  }

  EventLoop loop_;
  std::thread loop_thread_;
  std::vector<uint8_t> memory_;  // the arena, then the guard zone
  int64_t allocation_end_ = -1;  // loop thread
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<ObjectManager> manager_;
  ScriptedSender sender_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  fuzz::QuietLogs quiet_;  // every refused stream is logged
};

// A size for the first chunk: small, at the store's capacity, or at a boundary.
int64_t SizeField(std::mt19937_64& rng) {
  return static_cast<int64_t>(fuzz::BoundaryValue(rng, fuzz::OneIn(rng, 2) ? kCapacity : 0));
}

TEST_F(ObjectChunkFuzzTest, RandomChunkStreams) {
  const int64_t iterations = fuzz::Iterations(1200);
  std::mt19937_64 rng = fuzz::TestRng(iterations);
  int accepted = 0;
  for (int64_t i = 0; i < iterations && !HasFailure(); ++i) {
    int64_t total = static_cast<int64_t>(fuzz::Uniform(rng, 0, 8192));
    if (fuzz::OneIn(rng, 10)) total = kCapacity - static_cast<int64_t>(fuzz::Uniform(rng, 0, 64));
    if (fuzz::OneIn(rng, 10)) total = 0;
    std::string bytes(static_cast<size_t>(total), '\0');
    for (size_t k = 0; k < bytes.size(); k += 8) fuzz::PutLe(&bytes, k, 8, rng());
    const int64_t metadata_size = static_cast<int64_t>(fuzz::Uniform(rng, 0, std::min<int64_t>(total, 64)));
    std::vector<rpc::ObjectChunk> chunks = ValidChunks(rng, bytes, metadata_size);

    // Structured damage, each now and then: what a broken or hostile sender does.
    // An index into `chunks` (which is never empty until the last edit).
    auto pick = [&] { return static_cast<size_t>(fuzz::Uniform(rng, 0, chunks.size() - 1)); };
    if (fuzz::OneIn(rng, 6)) chunks.push_back(chunks[pick()]);  // a chunk again: overlap
    if (fuzz::OneIn(rng, 8) && chunks.size() > 1) chunks.erase(chunks.begin() + pick());  // a gap
    if (fuzz::OneIn(rng, 8)) std::swap(chunks[pick()], chunks[pick()]);   // out of order
    if (fuzz::OneIn(rng, 8)) chunks[pick()].set_offset(static_cast<int64_t>(fuzz::BoundaryValue(rng, total)));
    if (fuzz::OneIn(rng, 8)) {
      chunks[0].set_data_size(SizeField(rng));
      if (fuzz::OneIn(rng, 2)) chunks[0].set_metadata_size(SizeField(rng));
    }
    if (fuzz::OneIn(rng, 8)) chunks.insert(chunks.begin() + pick(), Chunk(0, 0, total, ""));  // empty
    if (fuzz::OneIn(rng, 10)) chunks.resize(pick());  // ends early
    Script script;
    for (const rpc::ObjectChunk& c : chunks) script.messages.push_back(c.SerializeAsString());
    auto pick_message = [&] { return static_cast<size_t>(fuzz::Uniform(rng, 0, script.messages.size() - 1)); };
    if (!script.messages.empty() && fuzz::OneIn(rng, 8)) {
      // A data field repeated in one message (protobuf: the last one counts).
      rpc::ObjectChunk extra;
      extra.set_data(fuzz::RandomBytes(rng, 512));
      script.messages[pick_message()] += extra.SerializeAsString();
    }
    if (!script.messages.empty() && fuzz::OneIn(rng, 6)) {
      const size_t k = pick_message();
      script.messages[k] = fuzz::Mutate(rng, script.messages[k], script.messages[0]);
    }
    if (fuzz::OneIn(rng, 20)) script.messages.push_back(fuzz::RandomBytes(rng, 64));
    if (fuzz::OneIn(rng, 12)) script.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "sender failed");
    SCOPED_TRACE("iteration " + std::to_string(i) + ": " + std::to_string(script.messages.size()) +
                 " messages, first " + fuzz::Hex(script.messages.empty() ? "" : script.messages[0], 48));
    PullAndCheck(rng, script);
    accepted += Expect(script, kCapacity).verdict == Expected::kAccept;
  }
  EXPECT_GT(accepted, 0);
}

TEST_F(ObjectChunkFuzzTest, SizesNearInt64MaxAreRefusedWithoutAllocating) {
  std::mt19937_64 rng(1);
  struct Case {
    int64_t data_size;
    int64_t metadata_size;
  };
  const Case cases[] = {{kInt64Max, 0},
                        {kInt64Max, 1},  // the sum overflows
                        {0, kInt64Max},
                        {kInt64Max, kInt64Max},
                        {kInt64Max - 63, 0},
                        {kCapacity + 1, 0},
                        {kCapacity, 1},
                        {-1, 0},
                        {0, -1},
                        {int64_t{1} << 62, int64_t{1} << 62},
                        {std::numeric_limits<int64_t>::min(), 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.data_size) + " + " + std::to_string(c.metadata_size));
    Script script{{Chunk(c.data_size, c.metadata_size, 0, "abc").SerializeAsString()}};
    Pulled pulled = Pull(rng, script);
    EXPECT_FALSE(pulled.status.ok());
    EXPECT_EQ(allocation_end_, -1) << "the store allocated for an object it cannot hold";
  }
}

TEST_F(ObjectChunkFuzzTest, OffsetsAndLengthsOutsideTheObjectAreRefused) {
  std::mt19937_64 rng(2);
  const int64_t total = 1000;
  const std::string head(500, 'h');
  struct Case {
    int64_t offset;
    int64_t length;
  };
  const Case cases[] = {{500, 501},      // one byte too many
                        {1000, 1},      // past the end
                        {999, 2},       // across the end
                        {kInt64Max, 1},
                        {kInt64Max, 0},
                        {-1, 1},
                        {-500, 1000},
                        {std::numeric_limits<int64_t>::min(), 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.offset) + " + " + std::to_string(c.length));
    Script script{{Chunk(total, 0, 0, head).SerializeAsString(),
                   Chunk(total, 0, c.offset, std::string(static_cast<size_t>(c.length), 'x')).SerializeAsString()}};
    PullAndCheck(rng, script);
    EXPECT_FALSE(Pull(rng, script).status.ok());
  }
  // A data field that declares more bytes than the message holds, up to 2^64 - 1.
  for (uint64_t declared : {uint64_t{600}, uint64_t{kInt64Max}, std::numeric_limits<uint64_t>::max()}) {
    std::string message = Chunk(total, 0, 0, "").SerializeAsString();
    message.push_back(0x22);  // field 4 (data), length-delimited
    fuzz::PutVarint(&message, declared);
    message += std::string(100, 'd');
    Script script{{message}};
    EXPECT_FALSE(Pull(rng, script).status.ok()) << declared;
  }
}

TEST_F(ObjectChunkFuzzTest, OverlappingChunksAreRefused) {
  // Together they count as many bytes as the object has, but half of it was never
  // sent: the pull must not seal that.
  std::mt19937_64 rng(3);
  const std::string half(500, 'o');
  Script twice{{Chunk(1000, 0, 0, half).SerializeAsString(), Chunk(1000, 0, 0, half).SerializeAsString()}};
  PullAndCheck(rng, twice);
  EXPECT_FALSE(Pull(rng, twice).status.ok());
  Script back{{Chunk(1000, 0, 0, std::string(600, 'a')).SerializeAsString(),
               Chunk(1000, 0, 200, std::string(400, 'b')).SerializeAsString()}};
  PullAndCheck(rng, back);
  EXPECT_FALSE(Pull(rng, back).status.ok());
}

TEST_F(ObjectChunkFuzzTest, ARepeatedDataFieldCannotWritePastTheObject) {
  // A multiple of 64 bytes at the end of the arena: the allocation ends exactly where
  // the object does, and the arena where the allocation does.
  std::mt19937_64 rng(4);
  for (int64_t total : {int64_t{4096}, kCapacity}) {
    for (size_t extra : {size_t{1}, size_t{4096}}) {
      SCOPED_TRACE(std::to_string(total) + " then " + std::to_string(extra));
      std::string message = Chunk(total, 0, 0, std::string(static_cast<size_t>(total), 'a')).SerializeAsString();
      rpc::ObjectChunk more;
      more.set_data(std::string(extra, 'b'));
      message += more.SerializeAsString();
      PullAndCheck(rng, Script{{message}});
    }
  }
}

TEST_F(ObjectChunkFuzzTest, ZeroLengthObjectsAndChunksArrive) {
  std::mt19937_64 rng(5);
  // An empty object: one chunk with nothing in it.
  Script empty{{Chunk(0, 0, 0, "").SerializeAsString()}};
  EXPECT_TRUE(Pull(rng, empty).status.ok());
  // Empty chunks between and after the others.
  Script sparse{{Chunk(10, 2, 0, "").SerializeAsString(), Chunk(10, 2, 0, "abcde").SerializeAsString(),
                 Chunk(10, 2, 5, "").SerializeAsString(), Chunk(10, 2, 5, "fghij").SerializeAsString(),
                 Chunk(10, 2, 10, "kl").SerializeAsString(), Chunk(10, 2, 12, "").SerializeAsString()}};
  Pulled pulled = Pull(rng, sparse);
  ASSERT_TRUE(pulled.status.ok()) << pulled.status;
  EXPECT_EQ(pulled.bytes, "abcdefghijkl");
  EXPECT_EQ(pulled.location->data_size, 10);
  EXPECT_EQ(pulled.location->metadata_size, 2);
}

TEST_F(ObjectChunkFuzzTest, AStreamThatEndsBeforeItsFirstChunkIsStoredArrivesWhole) {
  // The common case of a small object: one chunk, then the end of the stream, which
  // the puller may see before its loop has allocated the object for that chunk.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50 && !HasFailure(); ++i) {
    const std::string content = fuzz::RandomBytes(rng, 2000);
    Script one{{Chunk(static_cast<int64_t>(content.size()), 0, 0, content).SerializeAsString()}};
    Pulled pulled = Pull(rng, one, /*hold_loop_until_sent=*/true);
    ASSERT_TRUE(pulled.status.ok()) << pulled.status;
    EXPECT_TRUE(pulled.bytes == content);
    // A refused first chunk is a failure, however late the check runs.
    Script bad{{Chunk(0, 0, 0, "junk").SerializeAsString()}};
    EXPECT_FALSE(Pull(rng, bad, /*hold_loop_until_sent=*/true).status.ok());
  }
}

TEST_F(ObjectChunkFuzzTest, EmptyShortOrFailedStreamsFail) {
  std::mt19937_64 rng(6);
  EXPECT_FALSE(Pull(rng, Script{}).status.ok());
  EXPECT_FALSE(Pull(rng, Script{{Chunk(100, 0, 0, std::string(99, 'x')).SerializeAsString()}}).status.ok());
  Script failed{{Chunk(3, 0, 0, "abc").SerializeAsString()}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone")};
  EXPECT_FALSE(Pull(rng, failed).status.ok());
}

}  // namespace
}  // namespace manta::raylet
