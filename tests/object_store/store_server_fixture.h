// StoreServerTest: an ObjectStore and its StoreServer on a real Unix socket and
// memfd arena, the server's loop on its own thread; tests connect real
// ObjectStoreClients (or raw sockets) to it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "src/object_store/store_client.h"
#include "src/object_store/store_server.h"
#include "tests/test_util/test_util.h"

namespace manta::object_store {

inline constexpr int64_t kCapacity = 64 << 20;
inline constexpr int64_t kTimeoutMs = 10000;

class StoreServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto arena = Arena::Create(kCapacity);
    ASSERT_TRUE(arena.ok()) << arena.status();
    arena_ = std::move(*arena);
    store_ = std::make_unique<ObjectStore>(loop_, arena_->capacity(), ObjectStoreOptions(), nullptr, arena_->base());
    StoreServerOptions options;
    options.connect_timeout_ms = kConnectTimeoutMs;
    options.allowed_uid = allowed_uid_;
    server_ = std::make_unique<StoreServer>(loop_, *store_, *arena_, dir_.path() + "/store.sock", options);
    ASSERT_TRUE(server_->Start().ok());
    loop_thread_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    if (loop_thread_.joinable()) {
      OnLoop([this] {
        server_->Stop();
        return 0;
      });
      loop_.Stop();
      loop_thread_.join();
    }
    server_.reset();
    store_.reset();
  }

  // Runs `fn` on the loop thread and returns its result.
  template <typename F>
  auto OnLoop(F fn) -> decltype(fn()) {
    using T = decltype(fn());
    auto promise = std::make_shared<std::promise<T>>();
    std::future<T> future = promise->get_future();
    loop_.Post("StoreServerTest.OnLoop", [promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); });
    if (future.wait_for(std::chrono::milliseconds(kTimeoutMs)) != std::future_status::ready) {
      ADD_FAILURE() << "the loop did not answer";
      return T();
    }
    return future.get();
  }
  int64_t UsedBytes() {
    return OnLoop([this] { return store_->Stats().used_bytes; });
  }
  int64_t RefCount(const ObjectID& id) {
    return OnLoop([this, id] { return store_->RefCount(id); });
  }
  size_t NumClients() {
    return OnLoop([this] { return server_->num_clients(); });
  }

  std::unique_ptr<ObjectStoreClient> Connect() {
    auto client = ObjectStoreClient::Connect(socket_path());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
  // Creates, fills with `fill` and seals (dropping the creator's reference).
  void Put(ObjectStoreClient& client, const ObjectID& id, int64_t size, uint8_t fill) {
    absl::StatusOr<uint8_t*> data = client.Create(id, size);
    ASSERT_TRUE(data.ok()) << data.status();
    std::memset(*data, fill, static_cast<size_t>(size));
    ASSERT_TRUE(client.Seal(id, /*release=*/true, /*wait=*/true).ok());
  }
  const std::string& socket_path() const { return server_->socket_path(); }

  static constexpr int64_t kConnectTimeoutMs = 300;
  uid_t allowed_uid_ = geteuid();
  manta::testing::TempDir dir_;
  EventLoop loop_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<StoreServer> server_;
  std::thread loop_thread_;
};

}  // namespace manta::object_store
