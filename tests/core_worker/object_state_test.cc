// The owner's rows of `manta list objects` (src/core_worker/object_state.h): the
// reference type that keeps each object alive, largest first with unknown sizes last,
// filters applied before the limit, a summary over every match, and the detail
// fields. Built from OwnedObject values, and once from a real ReferenceCounter.
#include "src/core_worker/object_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "src/common/state_filter.h"

namespace manta::core {
namespace {

using OwnedObject = ReferenceCounter::OwnedObject;
using State = ReferenceCounter::State;

JobID TheJob() { return JobID::FromInt(7); }
const TaskID& DriverTask() {
  static const TaskID driver = TaskID::ForDriver(TheJob());
  return driver;
}
ObjectID Id(uint64_t i, const JobID& job = TheJob()) {
  const TaskID parent = job == TheJob() ? DriverTask() : TaskID::ForDriver(job);
  return ObjectID::FromIndex(TaskID::ForNormalTask(job, parent, i), 1);
}

// An object kept alive by `local` refs and `submitted` task refs.
OwnedObject Obj(uint64_t i, int64_t size_bytes, int32_t local = 1, int32_t submitted = 0) {
  OwnedObject o;
  o.id = Id(i);
  o.size_bytes = size_bytes;
  o.local_refs = local;
  o.submitted_task_refs = submitted;
  o.state = State::kReady;
  return o;
}

Address MakeAddress(const std::string& ip, int port) {
  Address a;
  a.node_id = NodeID::FromRandom();
  a.ip = ip;
  a.port = port;
  a.worker_id = WorkerID::FromRandom();
  return a;
}

ObjectOwner TheOwner(bool is_driver = true) {
  static const Address address = MakeAddress("10.1.2.3", 5000);
  return ObjectOwner{address, 4242, is_driver};
}

rpc::StateFilter Filter(const std::string& key, const std::string& predicate, const std::string& value) {
  rpc::StateFilter f;
  f.set_key(key);
  f.set_predicate(predicate);
  f.set_value(value);
  return f;
}

rpc::ListObjectsRequest Request(int64_t limit, std::vector<rpc::StateFilter> filters = {}, bool detail = false) {
  rpc::ListObjectsRequest request;
  request.set_limit(limit);
  request.set_detail(detail);
  for (rpc::StateFilter& f : filters) *request.add_filters() = std::move(f);
  return request;
}

struct Listed {
  absl::Status status;
  nlohmann::json rows;
  int64_t num_matched = 0;
  nlohmann::json summary;
};

Listed List(std::vector<OwnedObject> objects, const rpc::ListObjectsRequest& request,
            const ObjectOwner& owner = TheOwner()) {
  rpc::ListObjectsReply reply;
  Listed out;
  out.status = ListOwnedObjects(std::move(objects), owner, request, &reply);
  if (!out.status.ok()) return out;
  out.rows = nlohmann::json::parse(reply.rows_json());
  out.num_matched = reply.num_matched();
  out.summary = nlohmann::json::parse(reply.summary_json());
  return out;
}

// ---- Reference types ----------------------------------------------------------------

TEST(ObjectStateTest, ReferenceTypeTakesTheStrongestHolder) {
  OwnedObject o = Obj(1, 10, /*local=*/2, /*submitted=*/3);
  o.captured = true;
  o.borrowers.push_back(MakeAddress("10.0.0.9", 1));
  EXPECT_STREQ(ReferenceTypeOf(o), "LOCAL_REFERENCE");
  o.local_refs = 0;
  EXPECT_STREQ(ReferenceTypeOf(o), "USED_BY_PENDING_TASK");
  o.submitted_task_refs = 0;
  EXPECT_STREQ(ReferenceTypeOf(o), "CAPTURED_IN_OBJECT");
  o.captured = false;
  EXPECT_STREQ(ReferenceTypeOf(o), "BORROWED");
  o.borrowers.clear();
  EXPECT_STREQ(ReferenceTypeOf(o), "BORROWED");  // nothing else is left to name
}

TEST(ObjectStateTest, EachRowNamesItsReferenceTypeAndTaskStatus) {
  std::vector<OwnedObject> objects = {Obj(1, 40), Obj(2, 30, 0, 1), Obj(3, 20, 0, 0), Obj(4, 10, 0, 0)};
  objects[2].captured = true;
  objects[3].borrowers.push_back(MakeAddress("10.0.0.9", 1));
  objects[1].state = State::kPending;
  objects[3].state = State::kFailed;
  Listed listed = List(objects, Request(10));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 4u);
  EXPECT_EQ(listed.rows[0]["reference_type"], "LOCAL_REFERENCE");
  EXPECT_EQ(listed.rows[0]["task_status"], "FINISHED");
  EXPECT_EQ(listed.rows[1]["reference_type"], "USED_BY_PENDING_TASK");
  EXPECT_EQ(listed.rows[1]["task_status"], "PENDING");
  EXPECT_EQ(listed.rows[2]["reference_type"], "CAPTURED_IN_OBJECT");
  EXPECT_EQ(listed.rows[3]["reference_type"], "BORROWED");
  EXPECT_EQ(listed.rows[3]["task_status"], "FAILED");
  EXPECT_EQ(listed.rows[3]["num_borrowers"], 1);
}

// ---- Order and limit --------------------------------------------------------------------

TEST(ObjectStateTest, LargestFirstAndUnknownSizesLastAsNull) {
  Listed listed = List({Obj(1, 10), Obj(2, -1), Obj(3, 300), Obj(4, 0), Obj(5, 20), Obj(6, -1)}, Request(100));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 6u);
  EXPECT_EQ(listed.rows[0]["object_size"], 300);
  EXPECT_EQ(listed.rows[1]["object_size"], 20);
  EXPECT_EQ(listed.rows[2]["object_size"], 10);
  EXPECT_EQ(listed.rows[3]["object_size"], 0);
  EXPECT_TRUE(listed.rows[4]["object_size"].is_null());
  EXPECT_TRUE(listed.rows[5]["object_size"].is_null());
  // Equal sizes in id order, so that the answer does not depend on the table's.
  const std::string a = Id(2).Hex(), b = Id(6).Hex();
  EXPECT_EQ(listed.rows[4]["object_id"], std::min(a, b));
  EXPECT_EQ(listed.rows[5]["object_id"], std::max(a, b));
}

TEST(ObjectStateTest, TheLimitKeepsTheLargest) {
  std::vector<OwnedObject> objects;
  for (uint64_t i = 0; i < 20; ++i) objects.push_back(Obj(i, static_cast<int64_t>(i) * 10));
  Listed listed = List(objects, Request(3));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 3u);
  EXPECT_EQ(listed.num_matched, 20);
  EXPECT_EQ(listed.rows[0]["object_id"], Id(19).Hex());
  EXPECT_EQ(listed.rows[2]["object_id"], Id(17).Hex());
}

TEST(ObjectStateTest, ALimitOutsideOneToTenThousandIsAnError) {
  for (int64_t limit : {int64_t{0}, int64_t{-1}, int64_t{10001}, int64_t{1} << 40}) {
    Listed listed = List({Obj(1, 10)}, Request(limit));
    EXPECT_EQ(listed.status.code(), absl::StatusCode::kInvalidArgument) << limit;
    EXPECT_EQ(listed.status.message(), "limit " + std::to_string(limit) + " is out of range (1 to 10000)");
  }
  for (int64_t limit : {1, 10000}) {
    Listed listed = List({Obj(1, 10), Obj(2, 20)}, Request(limit));
    ASSERT_TRUE(listed.status.ok()) << limit << ": " << listed.status;
    EXPECT_EQ(listed.rows.size(), limit == 1 ? 1u : 2u);
    EXPECT_EQ(listed.num_matched, 2);
  }
  // An empty table is fine too.
  Listed empty = List({}, Request(5));
  ASSERT_TRUE(empty.status.ok());
  EXPECT_TRUE(empty.rows.is_array());
  EXPECT_TRUE(empty.rows.empty());
  EXPECT_EQ(empty.num_matched, 0);
  EXPECT_TRUE(empty.summary.is_object() && empty.summary.empty());
}

// ---- Filters ---------------------------------------------------------------------------

TEST(ObjectStateTest, FiltersApplyBeforeTheLimit) {
  std::vector<OwnedObject> objects;
  for (uint64_t i = 0; i < 50; ++i) {
    // Every tenth is only borrowed; those are the smallest, so no limit reaches them unfiltered.
    objects.push_back(i % 10 == 0 ? Obj(i, static_cast<int64_t>(i), 0, 0) : Obj(i, 1000 + static_cast<int64_t>(i)));
  }
  Listed listed = List(objects, Request(2, {Filter("reference_type", "=", "BORROWED")}));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 2u);
  EXPECT_EQ(listed.num_matched, 5);
  EXPECT_EQ(listed.rows[0]["object_id"], Id(40).Hex());
  EXPECT_EQ(listed.rows[1]["object_id"], Id(30).Hex());
  for (const auto& row : listed.rows) EXPECT_EQ(row["reference_type"], "BORROWED");
  EXPECT_EQ(listed.summary["BORROWED"]["count"], 5);
  EXPECT_FALSE(listed.summary.contains("LOCAL_REFERENCE"));
}

TEST(ObjectStateTest, NotEqualAndEnumValuesInAnyCase) {
  std::vector<OwnedObject> objects = {Obj(1, 10), Obj(2, 20, 0, 1), Obj(3, 30, 0, 0)};
  objects[1].state = State::kPending;
  Listed listed = List(objects, Request(10, {Filter("reference_type", "!=", "local_reference")}));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  EXPECT_EQ(listed.num_matched, 2);
  listed = List(objects, Request(10, {Filter("task_status", "=", "finished")}));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  EXPECT_EQ(listed.num_matched, 2);
  listed = List(objects, Request(10, {Filter("type", "=", "driver"), Filter("task_status", "=", "Pending")}));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.num_matched, 1);
  EXPECT_EQ(listed.rows[0]["object_id"], Id(2).Hex());
  listed = List(objects, Request(10, {Filter("type", "=", "WORKER")}));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  EXPECT_EQ(listed.num_matched, 0);
  EXPECT_TRUE(listed.rows.empty());
  // Ids compare exactly, and a number as its text.
  listed = List(objects, Request(10, {Filter("object_id", "=", Id(3).Hex())}));
  EXPECT_EQ(listed.num_matched, 1);
  listed = List(objects, Request(10, {Filter("object_size", "=", "20")}));
  ASSERT_EQ(listed.num_matched, 1);
  EXPECT_EQ(listed.rows[0]["object_id"], Id(2).Hex());
}

TEST(ObjectStateTest, AnUnknownFieldOrPredicateIsAnErrorNamingTheValidFields) {
  Listed listed = List({Obj(1, 10)}, Request(10, {Filter("colour", "=", "red")}));
  EXPECT_EQ(listed.status.code(), absl::StatusCode::kInvalidArgument);
  const std::string message(listed.status.message());
  EXPECT_NE(message.find("objects have no field 'colour'"), std::string::npos) << message;
  for (const std::string& key : manta::ObjectStateFilterKeys()) EXPECT_NE(message.find(key), std::string::npos) << key;
  listed = List({Obj(1, 10)}, Request(10, {Filter("reference_type", "~", "BORROWED")}));
  EXPECT_EQ(listed.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(listed.status.message()).find("predicate '~'"), std::string::npos) << listed.status;
  // The detail-only fields are not filters.
  listed = List({Obj(1, 10)}, Request(10, {Filter("spilled_url", "=", "")}, true));
  EXPECT_EQ(listed.status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ObjectStateTest, EveryFilterKeyIsAFieldOfTheRow) {
  Listed listed = List({Obj(1, 10)}, Request(1));
  ASSERT_TRUE(listed.status.ok());
  ASSERT_EQ(listed.rows.size(), 1u);
  for (const std::string& key : manta::ObjectStateFilterKeys()) EXPECT_TRUE(listed.rows[0].contains(key)) << key;
}

// ---- Summary -----------------------------------------------------------------------------

TEST(ObjectStateTest, TheSummaryCoversEveryMatchNotOnlyTheRowsReturned) {
  std::vector<OwnedObject> objects = {Obj(1, 100), Obj(2, 50), Obj(3, -1), Obj(4, 7, 0, 2), Obj(5, 3, 0, 0)};
  objects[2].state = State::kPending;
  objects[3].state = State::kPending;
  objects[4].state = State::kFailed;
  Listed listed = List(objects, Request(1));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  EXPECT_EQ(listed.rows.size(), 1u);
  EXPECT_EQ(listed.num_matched, 5);
  const nlohmann::json want = nlohmann::json::parse(R"({
    "LOCAL_REFERENCE": {"count": 3, "bytes": 150, "task_status": {"FINISHED": 2, "PENDING": 1}},
    "USED_BY_PENDING_TASK": {"count": 1, "bytes": 7, "task_status": {"PENDING": 1}},
    "BORROWED": {"count": 1, "bytes": 3, "task_status": {"FAILED": 1}}
  })");
  EXPECT_EQ(listed.summary, want) << listed.summary.dump();

  // With a filter and a limit: the summary is of the matches only, all of them.
  listed = List(objects, Request(1, {Filter("reference_type", "=", "LOCAL_REFERENCE")}));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  EXPECT_EQ(listed.rows.size(), 1u);
  EXPECT_EQ(listed.num_matched, 3);
  EXPECT_EQ(listed.summary, nlohmann::json({{"LOCAL_REFERENCE", want["LOCAL_REFERENCE"]}})) << listed.summary.dump();
}

// ---- Row fields --------------------------------------------------------------------------

TEST(ObjectStateTest, RowsNameTheirOwnerAndWhereTheCopiesAre) {
  OwnedObject o = Obj(1, 64);
  const NodeID pinned = NodeID::FromRandom(), other = NodeID::FromRandom();
  o.locations = {pinned, other};
  o.pinned_at = pinned;
  o.spilled_url = "file:///tmp/spill/1?offset=0&size=64";
  OwnedObject plain = Obj(2, 32);
  const ObjectOwner worker = TheOwner(/*is_driver=*/false);
  Listed listed = List({o, plain}, Request(10), worker);
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 2u);
  const nlohmann::json& row = listed.rows[0];
  EXPECT_EQ(row["object_id"], o.id.Hex());
  EXPECT_EQ(row["type"], "WORKER");
  EXPECT_EQ(row["pid"], 4242);
  EXPECT_EQ(row["ip"], "10.1.2.3");
  EXPECT_EQ(row["owner_worker_id"], worker.address.worker_id.Hex());
  EXPECT_EQ(row["node_id"], worker.address.node_id.Hex());
  EXPECT_EQ(row["pinned_at"], pinned.Hex());
  EXPECT_EQ(row["locations"], nlohmann::json({pinned.Hex(), other.Hex()}));
  EXPECT_EQ(row["spilled"], true);
  EXPECT_FALSE(row.contains("spilled_url"));
  EXPECT_FALSE(row.contains("borrowers"));
  EXPECT_FALSE(row.contains("local_refs"));
  EXPECT_EQ(listed.rows[1]["pinned_at"], "");
  EXPECT_EQ(listed.rows[1]["locations"], nlohmann::json::array());
  EXPECT_EQ(listed.rows[1]["spilled"], false);
  // Boolean fields filter as their text.
  listed = List({o, plain}, Request(10, {Filter("spilled", "=", "true")}), worker);
  ASSERT_EQ(listed.num_matched, 1);
  EXPECT_EQ(listed.rows[0]["object_id"], o.id.Hex());
  listed = List({o, plain}, Request(10, {Filter("pinned_at", "=", pinned.Hex())}), worker);
  EXPECT_EQ(listed.num_matched, 1);
}

TEST(ObjectStateTest, DetailAddsTheBorrowersSpillUrlAndCounts) {
  OwnedObject o = Obj(1, 64, /*local=*/2, /*submitted=*/3);
  const Address b1 = MakeAddress("10.0.0.7", 7000), b2 = MakeAddress("10.0.0.8", 8000);
  o.borrowers = {b1, b2};
  o.spilled_url = "s3://bucket/spill/1";
  Listed listed = List({o}, Request(10, {}, /*detail=*/true));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 1u);
  const nlohmann::json& row = listed.rows[0];
  EXPECT_EQ(row["spilled_url"], "s3://bucket/spill/1");
  EXPECT_EQ(row["local_refs"], 2);
  EXPECT_EQ(row["submitted_task_refs"], 3);
  EXPECT_EQ(row["num_borrowers"], 2);
  ASSERT_EQ(row["borrowers"].size(), 2u);
  EXPECT_EQ(row["borrowers"][0],
            nlohmann::json({{"worker_id", b1.worker_id.Hex()}, {"ip", "10.0.0.7"}, {"node_id", b1.node_id.Hex()}}));
  EXPECT_EQ(row["borrowers"][1]["worker_id"], b2.worker_id.Hex());
  // Without borrowers: an empty list, not a missing field.
  listed = List({Obj(2, 1)}, Request(10, {}, true));
  ASSERT_TRUE(listed.status.ok());
  EXPECT_EQ(listed.rows[0]["borrowers"], nlohmann::json::array());
  EXPECT_EQ(listed.rows[0]["spilled_url"], "");
}

TEST(ObjectStateTest, TheJobIdComesFromTheObjectId) {
  const JobID other_job = JobID::FromInt(99);
  OwnedObject mine = Obj(1, 10);
  OwnedObject theirs = Obj(2, 20);
  theirs.id = Id(2, other_job);
  Listed listed = List({mine, theirs}, Request(10));
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 2u);
  EXPECT_EQ(listed.rows[0]["job_id"], other_job.Hex());
  EXPECT_EQ(listed.rows[1]["job_id"], TheJob().Hex());
  listed = List({mine, theirs}, Request(10, {Filter("job_id", "=", TheJob().Hex())}));
  ASSERT_EQ(listed.num_matched, 1);
  EXPECT_EQ(listed.rows[0]["object_id"], mine.id.Hex());
  // A Put's id carries its job too.
  OwnedObject put = Obj(3, 5);
  put.id = ObjectID::ForPut(TaskID::ForDriver(other_job), 1);
  listed = List({put}, Request(10));
  ASSERT_TRUE(listed.status.ok());
  EXPECT_EQ(listed.rows[0]["job_id"], other_job.Hex());
}

// ---- End to end through a ReferenceCounter ---------------------------------------------

// Holds every WaitForRefRemoved: borrowers stay until the test is over.
class HoldingBorrowerClient : public BorrowerClientInterface {
 public:
  void WaitForRefRemoved(const Address&, const ObjectID&, const Address&, std::optional<ObjectID>,
                         std::function<void(absl::Status, std::vector<BorrowedRef>)> done) override {
    held.push_back(std::move(done));
  }
  std::deque<std::function<void(absl::Status, std::vector<BorrowedRef>)>> held;
};

TEST(ObjectStateTest, TheRowsOfARealReferenceCountersOwnedObjects) {
  HoldingBorrowerClient client;
  const Address self = MakeAddress("10.1.2.3", 5000);
  ReferenceCounter rc(self, &client);
  const ObjectID local = Id(1), pending_arg = Id(2), inner = Id(3), outer = Id(4), lent = Id(5), lineage = Id(6);
  // A ready object with a handle here, pinned and spilled.
  rc.AddOwnedObject(local, self, {}, 1000, /*pending=*/false);
  rc.AddLocalReference(local);
  const NodeID node = NodeID::FromRandom();
  rc.AddObjectLocation(local, node);
  rc.UpdatePinnedAt(local, node);
  rc.UpdateSpilledUrl(local, "file:///spill/local");
  // Only a pending task's argument.
  rc.AddOwnedObject(pending_arg, self, {});
  rc.AddLocalReference(pending_arg);
  rc.UpdateSubmittedTaskReferences({pending_arg});
  rc.RemoveLocalReference(pending_arg);
  // Only inside another object.
  rc.AddOwnedObject(inner, self, {}, 10, false);
  rc.AddLocalReference(inner);
  rc.AddOwnedObject(outer, self, {inner}, 20, false);
  rc.AddLocalReference(outer);
  rc.RemoveLocalReference(inner);
  // Only another worker holds it, and its task failed.
  const Address borrower = MakeAddress("10.0.0.9", 9000);
  rc.AddOwnedObject(lent, self, {}, 30, false);
  rc.AddLocalReference(lent);
  rc.UpdateSubmittedTaskReferences({lent});
  rc.UpdateFinishedTaskReferences({lent}, {BorrowedRef{lent, borrower}});
  rc.RemoveLocalReference(lent);
  rc.UpdateObjectFailed(lent);
  ASSERT_EQ(client.held.size(), 1u);
  // Kept for lineage only: no value, no row.
  rc.AddOwnedObject(lineage, self, {}, 5000, false);
  rc.AddLocalReference(lineage);
  rc.AddLineageReference(lineage);
  rc.RemoveLocalReference(lineage);
  ASSERT_TRUE(rc.HasReference(lineage));
  // Borrowed from elsewhere: not ours to list.
  rc.AddBorrowedObject(Id(7), MakeAddress("10.0.0.10", 1));

  Listed listed = List(rc.OwnedObjects(), Request(100, {}, /*detail=*/true), ObjectOwner{self, 77, true});
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  ASSERT_EQ(listed.rows.size(), 5u) << listed.rows.dump();
  EXPECT_EQ(listed.num_matched, 5);
  // Largest first: local (1000), lent (30), outer (20), inner (10), pending_arg (unknown).
  const std::vector<ObjectID> order = {local, lent, outer, inner, pending_arg};
  const std::vector<std::string> types = {"LOCAL_REFERENCE", "BORROWED", "LOCAL_REFERENCE", "CAPTURED_IN_OBJECT",
                                          "USED_BY_PENDING_TASK"};
  const std::vector<std::string> statuses = {"FINISHED", "FAILED", "FINISHED", "FINISHED", "PENDING"};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(listed.rows[i]["object_id"], order[i].Hex()) << i;
    EXPECT_EQ(listed.rows[i]["reference_type"], types[i]) << i;
    EXPECT_EQ(listed.rows[i]["task_status"], statuses[i]) << i;
    EXPECT_EQ(listed.rows[i]["owner_worker_id"], self.worker_id.Hex()) << i;
  }
  EXPECT_TRUE(listed.rows[4]["object_size"].is_null());
  EXPECT_EQ(listed.rows[0]["pinned_at"], node.Hex());
  EXPECT_EQ(listed.rows[0]["spilled_url"], "file:///spill/local");
  EXPECT_EQ(listed.rows[0]["locations"], nlohmann::json({node.Hex()}));
  EXPECT_EQ(listed.rows[1]["borrowers"][0]["worker_id"], borrower.worker_id.Hex());
  EXPECT_EQ(listed.rows[4]["submitted_task_refs"], 1);
  EXPECT_EQ(listed.summary["LOCAL_REFERENCE"]["count"], 2);
  EXPECT_EQ(listed.summary["LOCAL_REFERENCE"]["bytes"], 1020);

  // The borrower lets go: the object is freed and its row is gone.
  auto done = std::move(client.held.front());
  client.held.pop_front();
  done(absl::OkStatus(), {});
  listed = List(rc.OwnedObjects(), Request(100, {Filter("reference_type", "=", "borrowed")}), ObjectOwner{self, 77});
  ASSERT_TRUE(listed.status.ok()) << listed.status;
  EXPECT_EQ(listed.num_matched, 0);
}

}  // namespace
}  // namespace manta::core
