// The contract of StoreClientInterface (src/gcs/store_client.h) as a typed test
// suite, run against every implementation so that the in-memory store used by unit
// tests behaves like Redis.
//
// An instantiation supplies a Backend type:
//   struct Backend {
//     // Builds a fresh, empty store whose callbacks run on `loop`.
//     std::unique_ptr<StoreClientInterface> Make(EventLoop& loop);
//   };
// and writes INSTANTIATE_TYPED_TEST_SUITE_P(Name, StoreClientTest, Backend).
// Include this header in exactly one .cc per test binary.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/common/event_loop.h"
#include "src/gcs/store_client.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

template <typename Backend>
class StoreClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = backend_.Make(loop_);
    ASSERT_NE(store_, nullptr);
  }

  // Starts an async call with a recording callback and drives the loop until the
  // callback runs (with a deadline). A result that never came is DEADLINE_EXCEEDED.
  template <typename T, typename StartFn>
  absl::StatusOr<T> Await(StartFn start) {
    auto result = std::make_shared<std::optional<absl::StatusOr<T>>>();
    start([result](absl::StatusOr<T> r) { result->emplace(std::move(r)); });
    if (!RunLoopUntil(loop_, [&] { return result->has_value(); })) {
      ADD_FAILURE() << "store callback did not run";
      return absl::DeadlineExceededError("store callback did not run");
    }
    return std::move(**result);
  }

  absl::StatusOr<bool> Put(const std::string& table, const std::string& key, const std::string& value,
                           bool overwrite = true) {
    return Await<bool>([&](auto cb) { store_->AsyncPut(table, key, value, overwrite, std::move(cb)); });
  }
  absl::StatusOr<std::optional<std::string>> Get(const std::string& table, const std::string& key) {
    return Await<std::optional<std::string>>([&](auto cb) { store_->AsyncGet(table, key, std::move(cb)); });
  }
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> GetAll(const std::string& table) {
    return Await<absl::flat_hash_map<std::string, std::string>>(
        [&](auto cb) { store_->AsyncGetAll(table, std::move(cb)); });
  }
  absl::StatusOr<int64_t> Delete(const std::string& table, const std::vector<std::string>& keys) {
    return Await<int64_t>([&](auto cb) { store_->AsyncDelete(table, keys, std::move(cb)); });
  }
  absl::StatusOr<bool> Exists(const std::string& table, const std::string& key) {
    return Await<bool>([&](auto cb) { store_->AsyncExists(table, key, std::move(cb)); });
  }
  absl::StatusOr<std::vector<std::string>> GetKeys(const std::string& table, const std::string& prefix) {
    return Await<std::vector<std::string>>([&](auto cb) { store_->AsyncGetKeys(table, prefix, std::move(cb)); });
  }
  absl::StatusOr<int64_t> Increment(const std::string& table, const std::string& key, int64_t delta) {
    return Await<int64_t>([&](auto cb) { store_->AsyncIncrement(table, key, delta, std::move(cb)); });
  }

  Backend backend_;
  EventLoop loop_;
  std::unique_ptr<StoreClientInterface> store_;
};

TYPED_TEST_SUITE_P(StoreClientTest);

TYPED_TEST_P(StoreClientTest, PutThenGetReturnsTheValue) {
  ASSERT_THAT(this->Put("t", "k", "v"), IsOkAndHolds(true));
  EXPECT_THAT(this->Get("t", "k"), IsOkAndHolds(std::make_optional<std::string>("v")));
}

TYPED_TEST_P(StoreClientTest, BinaryValuesRoundTrip) {
  const std::string value("a\0b\xff\r\n*", 7);
  ASSERT_THAT(this->Put("t", "k", value), IsOkAndHolds(true));
  EXPECT_THAT(this->Get("t", "k"), IsOkAndHolds(std::make_optional<std::string>(value)));
}

TYPED_TEST_P(StoreClientTest, OverwritingPutReplacesValueAndReportsNotAdded) {
  ASSERT_THAT(this->Put("t", "k", "v1", /*overwrite=*/true), IsOkAndHolds(true));
  EXPECT_THAT(this->Put("t", "k", "v2", /*overwrite=*/true), IsOkAndHolds(false));
  EXPECT_THAT(this->Get("t", "k"), IsOkAndHolds(std::make_optional<std::string>("v2")));
}

TYPED_TEST_P(StoreClientTest, PutWithoutOverwriteKeepsOldValue) {
  ASSERT_THAT(this->Put("t", "k", "old", /*overwrite=*/false), IsOkAndHolds(true));
  EXPECT_THAT(this->Put("t", "k", "new", /*overwrite=*/false), IsOkAndHolds(false));
  EXPECT_THAT(this->Get("t", "k"), IsOkAndHolds(std::make_optional<std::string>("old")));
}

TYPED_TEST_P(StoreClientTest, GetOfMissingKeyIsNullopt) {
  EXPECT_THAT(this->Get("no_such_table", "k"), IsOkAndHolds(std::nullopt));
  ASSERT_THAT(this->Put("t", "other", "v"), IsOkAndHolds(true));
  EXPECT_THAT(this->Get("t", "k"), IsOkAndHolds(std::nullopt));
}

TYPED_TEST_P(StoreClientTest, GetAllReturnsEveryRowOfTheTable) {
  auto empty = this->GetAll("t");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(*empty, IsEmpty());

  ASSERT_THAT(this->Put("t", "a", "1"), IsOkAndHolds(true));
  ASSERT_THAT(this->Put("t", "b", "2"), IsOkAndHolds(true));
  ASSERT_THAT(this->Put("t", std::string("c\0", 2), std::string("3\0", 2)), IsOkAndHolds(true));
  auto all = this->GetAll("t");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(*all, UnorderedElementsAre(Pair("a", "1"), Pair("b", "2"),
                                         Pair(std::string("c\0", 2), std::string("3\0", 2))));
}

TYPED_TEST_P(StoreClientTest, DeleteCountsOnlyKeysThatExisted) {
  ASSERT_THAT(this->Put("t", "a", "1"), IsOkAndHolds(true));
  ASSERT_THAT(this->Put("t", "b", "2"), IsOkAndHolds(true));
  ASSERT_THAT(this->Put("t", "c", "3"), IsOkAndHolds(true));

  EXPECT_THAT(this->Delete("t", {"a", "b", "missing"}), IsOkAndHolds(2));
  EXPECT_THAT(this->Get("t", "a"), IsOkAndHolds(std::nullopt));
  EXPECT_THAT(this->Get("t", "c"), IsOkAndHolds(std::make_optional<std::string>("3")));
  EXPECT_THAT(this->Delete("t", {"a"}), IsOkAndHolds(0));
  EXPECT_THAT(this->Delete("t", {}), IsOkAndHolds(0));
  EXPECT_THAT(this->Delete("no_such_table", {"c"}), IsOkAndHolds(0));
}

TYPED_TEST_P(StoreClientTest, ExistsReflectsPutAndDelete) {
  EXPECT_THAT(this->Exists("t", "k"), IsOkAndHolds(false));
  ASSERT_THAT(this->Put("t", "k", ""), IsOkAndHolds(true));
  EXPECT_THAT(this->Exists("t", "k"), IsOkAndHolds(true)) << "an empty value still exists";
  ASSERT_THAT(this->Delete("t", {"k"}), IsOkAndHolds(1));
  EXPECT_THAT(this->Exists("t", "k"), IsOkAndHolds(false));
}

TYPED_TEST_P(StoreClientTest, GetKeysMatchesPrefixOfBinaryKeysLiterally) {
  const std::string nul_x("a\0x", 3), nul_y("a\0y", 3);
  for (const std::string& key : {std::string("a*"), std::string("a*b"), std::string("ab"), nul_x, nul_y,
                                 std::string("b"), std::string("[a]")}) {
    ASSERT_THAT(this->Put("t", key, "v"), IsOkAndHolds(true)) << key;
  }
  // Sorted byte-wise; '*' and '[' are not glob patterns here.
  EXPECT_THAT(this->GetKeys("t", "a*"), IsOkAndHolds((std::vector<std::string>{"a*", "a*b"})));
  EXPECT_THAT(this->GetKeys("t", "*"), IsOkAndHolds(std::vector<std::string>()));
  EXPECT_THAT(this->GetKeys("t", "["), IsOkAndHolds((std::vector<std::string>{"[a]"})));
  EXPECT_THAT(this->GetKeys("t", std::string("a\0", 2)), IsOkAndHolds((std::vector<std::string>{nul_x, nul_y})));
  EXPECT_THAT(this->GetKeys("t", "a"), IsOkAndHolds((std::vector<std::string>{nul_x, nul_y, "a*", "a*b", "ab"})));
  auto all = this->GetKeys("t", "");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 7u);
  EXPECT_THAT(this->GetKeys("no_such_table", ""), IsOkAndHolds(std::vector<std::string>()));
}

TYPED_TEST_P(StoreClientTest, IncrementStartsFromZeroAndAccumulates) {
  EXPECT_THAT(this->Increment("t", "n", 1), IsOkAndHolds(1));
  EXPECT_THAT(this->Increment("t", "n", 1), IsOkAndHolds(2));
  EXPECT_THAT(this->Increment("t", "n", 5), IsOkAndHolds(7));
  EXPECT_THAT(this->Increment("t", "n", -10), IsOkAndHolds(-3));
  // The counter is stored as its decimal text, readable with Get.
  EXPECT_THAT(this->Get("t", "n"), IsOkAndHolds(std::make_optional<std::string>("-3")));
}

TYPED_TEST_P(StoreClientTest, IncrementOfStoredDecimalTextContinuesFromIt) {
  ASSERT_THAT(this->Put("t", "n", "41"), IsOkAndHolds(true));
  EXPECT_THAT(this->Increment("t", "n", 1), IsOkAndHolds(42));
}

TYPED_TEST_P(StoreClientTest, IncrementOfNonIntegerFailsAndKeepsTheValue) {
  // Redis HINCRBY accepts only the canonical decimal form of a 64-bit integer.
  for (const std::string& bad : {std::string("abc"), std::string("1.5"), std::string(""), std::string(" 7"),
                                 std::string("7 "), std::string("+7"), std::string("007"),
                                 std::string("99999999999999999999")}) {
    SCOPED_TRACE("value '" + bad + "'");
    ASSERT_THAT(this->Put("t", "n", bad), IsOk());
    auto r = this->Increment("t", "n", 1);
    EXPECT_FALSE(r.ok()) << "incremented to " << *r;
    EXPECT_THAT(this->Get("t", "n"), IsOkAndHolds(std::make_optional<std::string>(bad)));
  }
}

TYPED_TEST_P(StoreClientTest, IncrementPastInt64MaxFails) {
  const std::string max = std::to_string(INT64_MAX);
  ASSERT_THAT(this->Put("t", "n", max), IsOkAndHolds(true));
  EXPECT_FALSE(this->Increment("t", "n", 1).ok());
  EXPECT_THAT(this->Get("t", "n"), IsOkAndHolds(std::make_optional<std::string>(max)));
}

TYPED_TEST_P(StoreClientTest, TablesAreIsolated) {
  ASSERT_THAT(this->Put("t1", "k", "one"), IsOkAndHolds(true));
  ASSERT_THAT(this->Put("t2", "k", "two"), IsOkAndHolds(true)) << "same key in another table is new";
  EXPECT_THAT(this->Get("t1", "k"), IsOkAndHolds(std::make_optional<std::string>("one")));
  EXPECT_THAT(this->Get("t2", "k"), IsOkAndHolds(std::make_optional<std::string>("two")));

  EXPECT_THAT(this->Increment("t1", "n", 3), IsOkAndHolds(3));
  EXPECT_THAT(this->Increment("t2", "n", 1), IsOkAndHolds(1));

  EXPECT_THAT(this->GetKeys("t1", ""), IsOkAndHolds((std::vector<std::string>{"k", "n"})));
  ASSERT_THAT(this->Delete("t1", {"k", "n"}), IsOkAndHolds(2));
  EXPECT_THAT(this->Exists("t1", "k"), IsOkAndHolds(false));
  EXPECT_THAT(this->Exists("t2", "k"), IsOkAndHolds(true));
  auto t2 = this->GetAll("t2");
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_THAT(*t2, UnorderedElementsAre(Pair("k", "two"), Pair("n", "1")));
}

TYPED_TEST_P(StoreClientTest, CallbacksRunOnTheLoopNeverInline) {
  bool called = false;
  this->store_->AsyncPut("t", "k", "v", true, [&](absl::StatusOr<bool>) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_TRUE(RunLoopUntil(this->loop_, [&] { return called; }));
}

TYPED_TEST_P(StoreClientTest, CommandsTakeEffectInSubmissionOrder) {
  // Issued back to back without waiting: the later write wins and the read sees it.
  std::vector<std::string> order;
  std::optional<std::string> read;
  this->store_->AsyncPut("t", "k", "v1", true, [&](absl::StatusOr<bool>) { order.push_back("put1"); });
  this->store_->AsyncPut("t", "k", "v2", true, [&](absl::StatusOr<bool>) { order.push_back("put2"); });
  this->store_->AsyncGet("t", "k", [&](absl::StatusOr<std::optional<std::string>> r) {
    order.push_back("get");
    if (r.ok()) read = *r;
  });
  ASSERT_TRUE(RunLoopUntil(this->loop_, [&] { return order.size() == 3; }));
  EXPECT_THAT(order, ElementsAre("put1", "put2", "get"));
  EXPECT_EQ(read, std::optional<std::string>("v2"));
}

REGISTER_TYPED_TEST_SUITE_P(StoreClientTest, PutThenGetReturnsTheValue, BinaryValuesRoundTrip,
                            OverwritingPutReplacesValueAndReportsNotAdded, PutWithoutOverwriteKeepsOldValue,
                            GetOfMissingKeyIsNullopt, GetAllReturnsEveryRowOfTheTable,
                            DeleteCountsOnlyKeysThatExisted, ExistsReflectsPutAndDelete,
                            GetKeysMatchesPrefixOfBinaryKeysLiterally, IncrementStartsFromZeroAndAccumulates,
                            IncrementOfStoredDecimalTextContinuesFromIt, IncrementOfNonIntegerFailsAndKeepsTheValue,
                            IncrementPastInt64MaxFails, TablesAreIsolated, CallbacksRunOnTheLoopNeverInline,
                            CommandsTakeEffectInSubmissionOrder);

}  // namespace manta::gcs::testing
