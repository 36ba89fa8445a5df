// GcsKVManager over an in-memory store: namespaces, overwrite, delete (exact and by
// prefix), exists, key listing and key validation.
#include "src/gcs/gcs_kv_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/gcs/in_memory_store_client.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

class GcsKVManagerTest : public ::testing::Test {
 protected:
  static constexpr int64_t kMaxValueBytes = 1000;
  GcsKVManagerTest() : store_(loop_), kv_(store_, kMaxValueBytes) {}

  absl::StatusOr<bool> Put(const std::string& ns, const std::string& key, const std::string& value,
                           bool overwrite = true) {
    rpc::InternalKVPutRequest request;
    request.set_namespace_(ns);
    request.set_key(key);
    request.set_value(value);
    request.set_overwrite(overwrite);
    rpc::InternalKVPutReply reply;
    absl::Status s = CallHandler(loop_, kv_, &GcsKVManager::HandlePut, request, &reply);
    if (!s.ok()) return s;
    return reply.added();
  }
  // The value, or nullopt when not found.
  absl::StatusOr<std::optional<std::string>> Get(const std::string& ns, const std::string& key) {
    rpc::InternalKVGetRequest request;
    request.set_namespace_(ns);
    request.set_key(key);
    rpc::InternalKVGetReply reply;
    absl::Status s = CallHandler(loop_, kv_, &GcsKVManager::HandleGet, request, &reply);
    if (!s.ok()) return s;
    if (!reply.found()) return std::optional<std::string>();
    return std::optional<std::string>(reply.value());
  }
  absl::StatusOr<int> Del(const std::string& ns, const std::string& key, bool by_prefix = false) {
    rpc::InternalKVDelRequest request;
    request.set_namespace_(ns);
    request.set_key(key);
    request.set_del_by_prefix(by_prefix);
    rpc::InternalKVDelReply reply;
    absl::Status s = CallHandler(loop_, kv_, &GcsKVManager::HandleDel, request, &reply);
    if (!s.ok()) return s;
    return reply.deleted_num();
  }
  absl::StatusOr<bool> Exists(const std::string& ns, const std::string& key) {
    rpc::InternalKVExistsRequest request;
    request.set_namespace_(ns);
    request.set_key(key);
    rpc::InternalKVExistsReply reply;
    absl::Status s = CallHandler(loop_, kv_, &GcsKVManager::HandleExists, request, &reply);
    if (!s.ok()) return s;
    return reply.exists();
  }
  absl::StatusOr<std::vector<std::string>> Keys(const std::string& ns, const std::string& prefix) {
    rpc::InternalKVKeysRequest request;
    request.set_namespace_(ns);
    request.set_prefix(prefix);
    rpc::InternalKVKeysReply reply;
    absl::Status s = CallHandler(loop_, kv_, &GcsKVManager::HandleKeys, request, &reply);
    if (!s.ok()) return s;
    return std::vector<std::string>(reply.results().begin(), reply.results().end());
  }

  EventLoop loop_;
  InMemoryStoreClient store_;
  GcsKVManager kv_;
};

TEST_F(GcsKVManagerTest, PutThenGet) {
  ASSERT_THAT(Put("ns", "k", "v"), IsOkAndHolds(true));
  EXPECT_THAT(Get("ns", "k"), IsOkAndHolds(std::make_optional<std::string>("v")));
  EXPECT_THAT(Get("ns", "missing"), IsOkAndHolds(std::nullopt));
}

TEST_F(GcsKVManagerTest, ValueOverTheLimitIsRefusedAndNothingIsStored) {
  ASSERT_THAT(Put("ns", "full", std::string(kMaxValueBytes, 'x')), IsOkAndHolds(true));
  auto over = Put("ns", "over", std::string(kMaxValueBytes + 1, 'x'));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("gcs_max_kv_value_bytes"), std::string::npos) << over.status();
  EXPECT_THAT(Put("ns", "over", "small", /*overwrite=*/false), IsOkAndHolds(true));  // was never added
}

TEST_F(GcsKVManagerTest, BinaryKeysAndValuesRoundTrip) {
  const std::string key("k\0*\xff", 4), value("\0v\0", 3);
  ASSERT_THAT(Put("ns", key, value), IsOkAndHolds(true));
  EXPECT_THAT(Get("ns", key), IsOkAndHolds(std::make_optional(value)));
  EXPECT_THAT(Keys("ns", std::string("k\0", 2)), IsOkAndHolds(ElementsAre(key)));
}

TEST_F(GcsKVManagerTest, NamespacesAreIsolated) {
  ASSERT_THAT(Put("a", "k", "in a"), IsOkAndHolds(true));
  ASSERT_THAT(Put("b", "k", "in b"), IsOkAndHolds(true));
  ASSERT_THAT(Put("", "k", "in default"), IsOkAndHolds(true));
  EXPECT_THAT(Get("a", "k"), IsOkAndHolds(std::make_optional<std::string>("in a")));
  EXPECT_THAT(Get("b", "k"), IsOkAndHolds(std::make_optional<std::string>("in b")));
  EXPECT_THAT(Get("", "k"), IsOkAndHolds(std::make_optional<std::string>("in default")));

  ASSERT_THAT(Del("a", "k"), IsOkAndHolds(1));
  EXPECT_THAT(Exists("a", "k"), IsOkAndHolds(false));
  EXPECT_THAT(Exists("b", "k"), IsOkAndHolds(true));
}

TEST_F(GcsKVManagerTest, NamespaceAndKeyDoNotRunTogether) {
  // ("a", "bc") and ("ab", "c") concatenate to the same bytes but are different keys.
  ASSERT_THAT(Put("a", "bc", "1"), IsOkAndHolds(true));
  ASSERT_THAT(Put("ab", "c", "2"), IsOkAndHolds(true));
  EXPECT_THAT(Get("a", "bc"), IsOkAndHolds(std::make_optional<std::string>("1")));
  EXPECT_THAT(Get("ab", "c"), IsOkAndHolds(std::make_optional<std::string>("2")));
  EXPECT_THAT(Keys("a", ""), IsOkAndHolds(ElementsAre("bc")));
  EXPECT_THAT(Keys("ab", ""), IsOkAndHolds(ElementsAre("c")));
  EXPECT_THAT(Del("a", "", /*by_prefix=*/true), IsOkAndHolds(1));
  EXPECT_THAT(Get("ab", "c"), IsOkAndHolds(std::make_optional<std::string>("2")));
}

TEST_F(GcsKVManagerTest, OverwriteSemantics) {
  ASSERT_THAT(Put("ns", "k", "v1", /*overwrite=*/false), IsOkAndHolds(true));
  EXPECT_THAT(Put("ns", "k", "v2", /*overwrite=*/false), IsOkAndHolds(false));
  EXPECT_THAT(Get("ns", "k"), IsOkAndHolds(std::make_optional<std::string>("v1")));
  EXPECT_THAT(Put("ns", "k", "v3", /*overwrite=*/true), IsOkAndHolds(false));
  EXPECT_THAT(Get("ns", "k"), IsOkAndHolds(std::make_optional<std::string>("v3")));
}

TEST_F(GcsKVManagerTest, DeleteExactKeyCountsWhatWasDeleted) {
  ASSERT_THAT(Put("ns", "key", "v"), IsOkAndHolds(true));
  ASSERT_THAT(Put("ns", "key2", "v"), IsOkAndHolds(true));
  EXPECT_THAT(Del("ns", "key"), IsOkAndHolds(1));
  EXPECT_THAT(Del("ns", "key"), IsOkAndHolds(0));
  EXPECT_THAT(Exists("ns", "key2"), IsOkAndHolds(true)) << "an exact delete is not a prefix delete";
}

TEST_F(GcsKVManagerTest, DeleteByPrefixStaysInItsNamespace) {
  for (const char* key : {"job:1", "job:2", "job:3", "actor:1"}) ASSERT_THAT(Put("ns", key, "v"), IsOk());
  ASSERT_THAT(Put("other", "job:1", "v"), IsOk());

  EXPECT_THAT(Del("ns", "job:", /*by_prefix=*/true), IsOkAndHolds(3));
  EXPECT_THAT(Keys("ns", ""), IsOkAndHolds(ElementsAre("actor:1")));
  EXPECT_THAT(Exists("other", "job:1"), IsOkAndHolds(true));
  EXPECT_THAT(Del("ns", "job:", /*by_prefix=*/true), IsOkAndHolds(0));
}

TEST_F(GcsKVManagerTest, ExistsTracksPutAndDel) {
  EXPECT_THAT(Exists("ns", "k"), IsOkAndHolds(false));
  ASSERT_THAT(Put("ns", "k", ""), IsOkAndHolds(true));
  EXPECT_THAT(Exists("ns", "k"), IsOkAndHolds(true));
  ASSERT_THAT(Del("ns", "k"), IsOkAndHolds(1));
  EXPECT_THAT(Exists("ns", "k"), IsOkAndHolds(false));
}

TEST_F(GcsKVManagerTest, KeysListsMatchingKeysOfTheNamespaceWithoutItsEncoding) {
  for (const char* key : {"a/1", "a/2", "b/1"}) ASSERT_THAT(Put("ns", key, "v"), IsOk());
  ASSERT_THAT(Put("ns2", "a/3", "v"), IsOk());
  EXPECT_THAT(Keys("ns", "a/"), IsOkAndHolds(UnorderedElementsAre("a/1", "a/2")));
  EXPECT_THAT(Keys("ns", ""), IsOkAndHolds(UnorderedElementsAre("a/1", "a/2", "b/1")));
  EXPECT_THAT(Keys("ns", "z"), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(Keys("empty-ns", ""), IsOkAndHolds(IsEmpty()));
}

TEST_F(GcsKVManagerTest, EmptyOrOversizedKeyIsRejected) {
  EXPECT_THAT(Put("ns", "", "v"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Put("ns", std::string(64 * 1024 + 1, 'k'), "v"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Put("ns", std::string(64 * 1024, 'k'), "v"), IsOkAndHolds(true));
  EXPECT_THAT(Keys("ns", ""), IsOkAndHolds(::testing::SizeIs(1)));
}

}  // namespace
}  // namespace manta::gcs::testing
