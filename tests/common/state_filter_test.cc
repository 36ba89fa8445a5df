// The state API's filters (src/common/state_filter.h): checking keys and predicates,
// comparing a field's text (enum-like fields without regard to case), the text of a
// JSON value, and whole rows (every filter must pass; a missing field is "").
#include "src/common/state_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace manta {
namespace {

rpc::StateFilter Filter(const std::string& key, const std::string& predicate, const std::string& value) {
  rpc::StateFilter f;
  f.set_key(key);
  f.set_predicate(predicate);
  f.set_value(value);
  return f;
}

TEST(StateFilterTest, KnownKeysWithEitherPredicatePass) {
  const std::vector<std::string> keys = {"state", "node_id"};
  EXPECT_TRUE(CheckStateFilters("nodes", keys, {}).ok());
  EXPECT_TRUE(CheckStateFilters("nodes", keys, {Filter("state", "=", "ALIVE"), Filter("node_id", "!=", "x")}).ok());
}

TEST(StateFilterTest, AnUnknownKeyIsNamedWithTheValidOnes) {
  const std::vector<std::string> keys = {"state", "node_id", "ip"};
  absl::Status s = CheckStateFilters("nodes", keys, {Filter("state", "=", "ALIVE"), Filter("colour", "=", "red")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "nodes have no field 'colour' to filter on; the fields are state, node_id, ip");
  // Keys compare exactly: another case is another key.
  EXPECT_EQ(CheckStateFilters("nodes", keys, {Filter("State", "=", "ALIVE")}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StateFilterTest, AnUnknownPredicateIsRefused) {
  const std::vector<std::string> keys = {"state"};
  for (const char* predicate : {"~", "==", "<", "", "=!"}) {
    absl::Status s = CheckStateFilters("jobs", keys, {Filter("state", predicate, "x")});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << predicate;
    EXPECT_EQ(s.message(), "unknown filter predicate '" + std::string(predicate) + "' (use = or !=)");
  }
}

TEST(StateFilterTest, EnumLikeFieldsCompareWithoutRegardToCase) {
  for (const char* key : {"state", "type", "error_type", "strategy", "status", "reference_type", "task_status",
                          "worker_type"}) {
    EXPECT_TRUE(PassesStateFilter("ALIVE", Filter(key, "=", "alive"))) << key;
    EXPECT_TRUE(PassesStateFilter("alive", Filter(key, "=", "ALIVE"))) << key;
    EXPECT_FALSE(PassesStateFilter("ALIVE", Filter(key, "!=", "Alive"))) << key;
    EXPECT_FALSE(PassesStateFilter("ALIVE", Filter(key, "=", "DEAD"))) << key;
    EXPECT_TRUE(PassesStateFilter("ALIVE", Filter(key, "!=", "dead"))) << key;
  }
}

TEST(StateFilterTest, OtherFieldsCompareExactly) {
  for (const char* key : {"node_id", "name", "job_id", "exit_detail"}) {
    EXPECT_TRUE(PassesStateFilter("AbC", Filter(key, "=", "AbC"))) << key;
    EXPECT_FALSE(PassesStateFilter("AbC", Filter(key, "=", "abc"))) << key;
    EXPECT_TRUE(PassesStateFilter("AbC", Filter(key, "!=", "abc"))) << key;
    EXPECT_FALSE(PassesStateFilter("AbC", Filter(key, "!=", "AbC"))) << key;
  }
  // No prefix or substring match.
  EXPECT_FALSE(PassesStateFilter("abcdef", Filter("node_id", "=", "abc")));
}

TEST(StateFilterTest, FilterTextOfEachJsonKind) {
  EXPECT_EQ(FilterText(nlohmann::ordered_json("ALIVE")), "ALIVE");
  EXPECT_EQ(FilterText(nlohmann::ordered_json("")), "");
  EXPECT_EQ(FilterText(nlohmann::ordered_json()), "");
  EXPECT_EQ(FilterText(nlohmann::ordered_json(3)), "3");
  EXPECT_EQ(FilterText(nlohmann::ordered_json(-12)), "-12");
  EXPECT_EQ(FilterText(nlohmann::ordered_json(int64_t{1} << 40)), "1099511627776");
  EXPECT_EQ(FilterText(nlohmann::ordered_json(1.5)), "1.5");
  EXPECT_EQ(FilterText(nlohmann::ordered_json(true)), "true");
  EXPECT_EQ(FilterText(nlohmann::ordered_json(false)), "false");
}

TEST(StateFilterTest, ARowPassesOnlyWhenEveryFilterDoes) {
  const nlohmann::ordered_json row = {{"state", "ALIVE"}, {"pid", 42}, {"is_alive", true}, {"ip", "10.0.0.1"}};
  EXPECT_TRUE(RowPassesStateFilters(row, {}));
  EXPECT_TRUE(RowPassesStateFilters(row, {Filter("state", "=", "alive"), Filter("pid", "=", "42")}));
  EXPECT_TRUE(RowPassesStateFilters(row, {Filter("is_alive", "=", "true"), Filter("ip", "!=", "10.0.0.2")}));
  EXPECT_FALSE(RowPassesStateFilters(row, {Filter("state", "=", "alive"), Filter("pid", "=", "43")}));
  EXPECT_FALSE(RowPassesStateFilters(row, {Filter("pid", "!=", "42"), Filter("state", "=", "ALIVE")}));
}

TEST(StateFilterTest, AMissingFieldReadsAsEmpty) {
  const nlohmann::ordered_json row = {{"state", "ALIVE"}, {"size", nullptr}};
  EXPECT_TRUE(RowPassesStateFilters(row, {Filter("node_id", "=", "")}));
  EXPECT_FALSE(RowPassesStateFilters(row, {Filter("node_id", "=", "x")}));
  EXPECT_TRUE(RowPassesStateFilters(row, {Filter("node_id", "!=", "x")}));
  // A null field is "" too.
  EXPECT_TRUE(RowPassesStateFilters(row, {Filter("size", "=", "")}));
  EXPECT_FALSE(RowPassesStateFilters(row, {Filter("size", "=", "null")}));
}

TEST(StateFilterTest, TheWorkerAndObjectKeysAreDistinctAndPassTheirOwnCheck) {
  for (const std::vector<std::string>* keys : {&WorkerStateFilterKeys(), &ObjectStateFilterKeys()}) {
    ASSERT_FALSE(keys->empty());
    std::vector<rpc::StateFilter> filters;
    for (size_t i = 0; i < keys->size(); ++i) {
      for (size_t j = 0; j < i; ++j) EXPECT_NE((*keys)[i], (*keys)[j]);
      filters.push_back(Filter((*keys)[i], "=", "x"));
    }
    EXPECT_TRUE(CheckStateFilters("rows", *keys, filters).ok());
  }
  absl::Status s = CheckStateFilters("workers", WorkerStateFilterKeys(), {Filter("object_size", "=", "1")});
  EXPECT_NE(s.message().find("worker_id, is_alive, worker_type"), absl::string_view::npos) << s;
}

TEST(StateFilterTest, ABooleanFieldTakesRaysSpellings) {
  for (const char* yes : {"true", "True", "1"}) {
    EXPECT_TRUE(PassesStateFilter("true", Filter("is_alive", "=", yes))) << yes;
    EXPECT_FALSE(PassesStateFilter("false", Filter("is_alive", "=", yes))) << yes;
  }
  for (const char* no : {"false", "False", "0"}) EXPECT_TRUE(PassesStateFilter("false", Filter("spilled", "=", no)));
  EXPECT_TRUE(PassesStateFilter("true", Filter("is_head_node", "!=", "False")));
  // Not a boolean field: "1" is only "1".
  EXPECT_FALSE(PassesStateFilter("12", Filter("pid", "=", "1")));
}

}  // namespace
}  // namespace manta
