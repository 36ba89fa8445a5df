// RedisStoreClient against a real redis-server: the shared StoreClientInterface
// contract (store_client_test_suite.h), plus what only a networked store has to get
// right: connection and authentication errors at start-up, durability across
// clients (a GCS restart), and failing (not hanging, not crashing) when Redis dies
// or stops answering.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "src/common/process.h"
#include "src/common/util.h"
#include "src/gcs/redis_store_client.h"
#include "tests/gcs/store_client_test_suite.h"

namespace manta::gcs::testing {
namespace {

using manta::testing::RedisServer;
using manta::testing::TempDir;
using manta::testing::WaitFor;

// One retry, so that a dead Redis is reported in well under a second. A refused or
// reset connection is noticed at once; only a hung Redis waits for a timeout.
RedisStoreClient::Options FastOptions(int port) {
  RedisStoreClient::Options o;
  o.port = port;
  o.key_prefix = "manta:test:";
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = 2000;
  o.retry_attempts = 1;
  return o;
}

// For a Redis that accepts connections but never answers (SIGSTOP).
RedisStoreClient::Options HungRedisOptions(int port) {
  RedisStoreClient::Options o = FastOptions(port);
  o.command_timeout_ms = 300;
  return o;
}

struct RedisBackend {
  RedisServer server;
  std::unique_ptr<StoreClientInterface> Make(EventLoop& loop) {
    auto client = RedisStoreClient::Connect(loop, FastOptions(server.port()));
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return nullptr;
    return std::move(*client);
  }
};

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, StoreClientTest, RedisBackend);

namespace {

// A redis-server started by the test with its own arguments on a given port (to set
// a password, or to restart on the same port), killed by pid.
class RedisProcess {
 public:
  RedisProcess(int port, const std::vector<std::string>& extra_args) : port_(port) {
    ProcessOptions p;
    p.argv = {FindExecutable("redis-server"), "--port", std::to_string(port), "--bind", "127.0.0.1",
              "--save", "", "--appendonly", "no", "--dir", dir_.path()};
    p.argv.insert(p.argv.end(), extra_args.begin(), extra_args.end());
    p.output_file = dir_.path() + "/redis.out";
    auto pid = StartProcess(p);
    if (!pid.ok()) {
      ADD_FAILURE() << pid.status();
      return;
    }
    pid_ = *pid;
    if (!WaitFor([&] { return !ReapIfExited(pid_) && IsPortOpen("127.0.0.1", port_); }, 10000)) {
      ADD_FAILURE() << "redis-server did not come up on port " << port_;
      Kill();
    }
  }
  ~RedisProcess() { Kill(); }

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    WaitForExit(pid_, 5000);
    pid_ = 0;
  }

 private:
  int port_;
  pid_t pid_ = 0;
  TempDir dir_;
};

class RedisStoreClientTest : public ::testing::Test {
 protected:
  // Runs one Put and waits (with a deadline) for its callback.
  absl::StatusOr<bool> Put(StoreClientInterface& store, const std::string& key, const std::string& value) {
    auto result = std::make_shared<std::optional<absl::StatusOr<bool>>>();
    store.AsyncPut("t", key, value, true, [result](absl::StatusOr<bool> r) { *result = std::move(r); });
    if (!RunLoopUntil(loop_, [&] { return result->has_value(); }, 10000)) {
      return absl::DeadlineExceededError("Put callback did not run");
    }
    return std::move(**result);
  }
  absl::StatusOr<std::optional<std::string>> Get(StoreClientInterface& store, const std::string& key) {
    auto result = std::make_shared<std::optional<absl::StatusOr<std::optional<std::string>>>>();
    store.AsyncGet("t", key, [result](absl::StatusOr<std::optional<std::string>> r) { *result = std::move(r); });
    if (!RunLoopUntil(loop_, [&] { return result->has_value(); }, 10000)) {
      return absl::DeadlineExceededError("Get callback did not run");
    }
    return std::move(**result);
  }

  EventLoop loop_;
};

TEST_F(RedisStoreClientTest, ConnectWithNothingListeningIsUnavailableNamingTheAddress) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = RedisStoreClient::Connect(loop_, FastOptions(*port));
  EXPECT_THAT(client, StatusIs(absl::StatusCode::kUnavailable, "127.0.0.1:" + std::to_string(*port)));
}

TEST_F(RedisStoreClientTest, PasswordIsCheckedAtConnect) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  RedisProcess redis(*port, {"--requirepass", "s3cret"});
  ASSERT_TRUE(redis.running());
  const std::string where = "127.0.0.1:" + std::to_string(*port);

  RedisStoreClient::Options wrong = FastOptions(*port);
  wrong.password = "wrong";
  EXPECT_THAT(RedisStoreClient::Connect(loop_, wrong), StatusIs(absl::StatusCode::kPermissionDenied, where));

  RedisStoreClient::Options none = FastOptions(*port);
  EXPECT_THAT(RedisStoreClient::Connect(loop_, none), StatusIs(absl::StatusCode::kPermissionDenied, where));

  RedisStoreClient::Options right = FastOptions(*port);
  right.password = "s3cret";
  auto client = RedisStoreClient::Connect(loop_, right);
  ASSERT_THAT(client, IsOk());
  EXPECT_THAT(Put(**client, "k", "v"), IsOkAndHolds(true));
}

TEST_F(RedisStoreClientTest, TablesAreRedisHashesNamedByPrefixAndTable) {
  RedisServer redis;
  auto client = RedisStoreClient::Connect(loop_, FastOptions(redis.port()));
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(Put(**client, "k", "v"), IsOkAndHolds(true));

  auto raw = RedisStoreClient::RunOnce(FastOptions(redis.port()), {"HGET", "manta:test:t", "k"});
  ASSERT_THAT(raw, IsOk());
  EXPECT_EQ(raw->type, RedisValue::Type::kString);
  EXPECT_EQ(raw->str, "v");
}

TEST_F(RedisStoreClientTest, DataWrittenByOneClientIsReadByAFreshClient) {
  // What a GCS restart relies on: the next GCS process reads what the last one wrote.
  RedisServer redis;
  {
    auto first = RedisStoreClient::Connect(loop_, FastOptions(redis.port()));
    ASSERT_THAT(first, IsOk());
    ASSERT_THAT(Put(**first, "node1", "info"), IsOkAndHolds(true));
  }
  auto second = RedisStoreClient::Connect(loop_, FastOptions(redis.port()));
  ASSERT_THAT(second, IsOk());
  EXPECT_THAT(Get(**second, "node1"), IsOkAndHolds(std::make_optional<std::string>("info")));

  // Another cluster (key prefix) on the same Redis sees none of it.
  RedisStoreClient::Options other = FastOptions(redis.port());
  other.key_prefix = "manta:other:";
  auto third = RedisStoreClient::Connect(loop_, other);
  ASSERT_THAT(third, IsOk());
  EXPECT_THAT(Get(**third, "node1"), IsOkAndHolds(std::nullopt));
}

TEST_F(RedisStoreClientTest, RedisKilledMidUseFailsCallbacksWithinDeadline) {
  auto redis = std::make_unique<RedisServer>();
  auto client = RedisStoreClient::Connect(loop_, FastOptions(redis->port()));
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(Put(**client, "k", "v"), IsOkAndHolds(true));

  redis.reset();  // kill -9
  int64_t start = MonotonicMs();
  EXPECT_THAT(Put(**client, "k", "v2"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Get(**client, "k"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(MonotonicMs() - start, 5000);
}

TEST_F(RedisStoreClientTest, LargeWriteToKilledRedisFailsWithoutKillingTheProcess) {
  // Writing a big command to a socket whose peer is gone raises SIGPIPE, whose default
  // action would kill the whole GCS.
  auto redis = std::make_unique<RedisServer>();
  auto client = RedisStoreClient::Connect(loop_, FastOptions(redis->port()));
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(Put(**client, "k", "v"), IsOkAndHolds(true));

  redis.reset();
  EXPECT_THAT(Put(**client, "big", std::string(16 << 20, 'x')), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(RedisStoreClientTest, ReconnectsWhenRedisComesBackOnTheSamePort) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  auto redis = std::make_unique<RedisProcess>(*port, std::vector<std::string>{});
  ASSERT_TRUE(redis->running());
  RedisStoreClient::Options options = FastOptions(*port);
  options.retry_attempts = 3;
  auto client = RedisStoreClient::Connect(loop_, options);
  ASSERT_THAT(client, IsOk());
  ASSERT_THAT(Put(**client, "k", "v"), IsOkAndHolds(true));

  redis.reset();
  redis = std::make_unique<RedisProcess>(*port, std::vector<std::string>{});
  ASSERT_TRUE(redis->running());
  // The old connection is broken; the command reconnects and succeeds (fresh Redis).
  EXPECT_THAT(Put(**client, "k", "again"), IsOkAndHolds(true));
  EXPECT_THAT(Get(**client, "k"), IsOkAndHolds(std::make_optional<std::string>("again")));
}

TEST_F(RedisStoreClientTest, ConnectToHungRedisIsUnavailable) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  RedisProcess redis(*port, {});
  ASSERT_TRUE(redis.running());
  ASSERT_EQ(kill(redis.pid(), SIGSTOP), 0);

  // It accepts the connection (the kernel does) but never answers.
  EXPECT_THAT(RedisStoreClient::Connect(loop_, HungRedisOptions(*port)),
              StatusIs(absl::StatusCode::kUnavailable, "127.0.0.1:" + std::to_string(*port)));
  kill(redis.pid(), SIGCONT);
}

TEST_F(RedisStoreClientTest, HungRedisFailsCommandsWithinDeadlineThenRecovers) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  RedisProcess redis(*port, {});
  ASSERT_TRUE(redis.running());
  auto client = RedisStoreClient::Connect(loop_, HungRedisOptions(*port));
  ASSERT_THAT(client, IsOk());

  ASSERT_EQ(kill(redis.pid(), SIGSTOP), 0);
  int64_t start = MonotonicMs();
  EXPECT_THAT(Put(**client, "k", "v"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(MonotonicMs() - start, 5000);

  ASSERT_EQ(kill(redis.pid(), SIGCONT), 0);
  EXPECT_THAT(Put(**client, "k2", "v2"), IsOkAndHolds(true));
}

}  // namespace
}  // namespace manta::gcs::testing
