// Placement groups through the public API in local mode (everything in this process):
// Ray's aggregate init, creation and every validation error, names per namespace,
// removal, lookups, Wait and its callback, tasks and actors placed in bundles (index
// checks, a removed group failing them); the local table itself; and, over the fake
// runtime, what the API hands a runtime (timeouts, placements).
#include <gtest/gtest.h>

#include <condition_variable>
#include <limits>
#include <mutex>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "ray/api.h"
#include "src/api/local_placement_groups.h"
#include "tests/api/fake_runtime.h"
#include "tests/api/local_mode_fixture.h"

namespace local_mode_placement_group_test {
namespace {

using Bundles = std::vector<std::unordered_map<std::string, double>>;
using ray::internal::RayActorException;
using ray::internal::RayException;

// Holds tasks that call Blocked() until Release().
std::mutex g_mu;
std::condition_variable g_cv;
bool g_released = false;

int BundleTen() { return 10; }
int Blocked() {
  std::unique_lock<std::mutex> lock(g_mu);
  g_cv.wait(lock, [] { return g_released; });
  return 1;
}
int BundlePlus(int a, int b) { return a + b; }
void Release() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_released = true;
  g_cv.notify_all();
}

class BundleCounter {
 public:
  static BundleCounter* Create(int start) { return new BundleCounter{start}; }
  int Add(int x) { return count += x; }
  int count;
};

RAY_REMOTE(BundleTen, Blocked, BundlePlus, BundleCounter::Create, &BundleCounter::Add);

// The message of the RayException `fn` throws (of exactly that type when `exact`);
// "" when it throws nothing.
template <typename F>
std::string ErrorOf(F fn, bool exact = true) {
  try {
    fn();
  } catch (const RayException& e) {
    if (exact) {
      EXPECT_EQ(typeid(e), typeid(RayException)) << e.what();
    }
    return e.what();
  } catch (...) {
    ADD_FAILURE() << "threw something other than a RayException";
    return "(not a RayException)";
  }
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

ray::PlacementGroup Create(const std::string& name, const Bundles& bundles,
                           ray::PlacementStrategy strategy = ray::PlacementStrategy::PACK) {
  ray::PlacementGroupCreationOptions options{name, bundles, strategy};
  return ray::CreatePlacementGroup(options);
}

class LocalModePlacementGroupTest : public manta::testing::LocalModeFixture {
 protected:
  LocalModePlacementGroupTest() : LocalModeFixture("pg-ns") {}

  const Bundles two_cpus_{{{"CPU", 1}}, {{"CPU", 1}, {"memory", 100}}};
};

TEST_F(LocalModePlacementGroupTest, RaysAggregateInitCreatesAGroupAtOnce) {
  std::string name = "workers";
  Bundles bundles = two_cpus_;
  ray::PlacementGroupCreationOptions options{name, bundles, ray::PlacementStrategy::SPREAD};
  ray::PlacementGroup group = ray::CreatePlacementGroup(options);
  EXPECT_FALSE(group.Empty());
  EXPECT_EQ(group.GetID().size(), 18u);
  EXPECT_EQ(group.GetName(), "workers");
  EXPECT_EQ(group.GetBundles(), bundles);
  EXPECT_EQ(group.GetStrategy(), ray::PlacementStrategy::SPREAD);
  EXPECT_EQ(group.GetState(), ray::PlacementGroupState::CREATED);  // one process: placed at once
  EXPECT_TRUE(group.Wait(0));
  EXPECT_TRUE(group.Wait(10));
  for (auto strategy : {ray::PlacementStrategy::PACK, ray::PlacementStrategy::STRICT_PACK,
                        ray::PlacementStrategy::STRICT_SPREAD}) {
    EXPECT_EQ(Create("", two_cpus_, strategy).GetStrategy(), strategy);
  }
  EXPECT_NE(Create("", two_cpus_).GetID(), Create("", two_cpus_).GetID());
}

TEST_F(LocalModePlacementGroupTest, EveryInvalidGroupIsRefusedNamingTheProblem) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    Bundles bundles;
    ray::PlacementStrategy strategy;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {{}, ray::PlacementStrategy::PACK, {"bundle list is empty"}},
      {{{{"CPU", 1}}, {}}, ray::PlacementStrategy::PACK, {"bundle 1", "empty"}},
      {{{{"CPU", 0}, {"GPU", 0}}}, ray::PlacementStrategy::PACK, {"bundle 0", "no resource with a positive"}},
      {{{{"CPU", 1}}, {{"CPU", 1}, {"GPU", -1}}}, ray::PlacementStrategy::PACK, {"bundle 1", "'GPU'", "negative"}},
      {{{{"CPU", nan}}}, ray::PlacementStrategy::PACK, {"bundle 0", "'CPU'", "finite"}},
      {{{{"CPU", 1}}, {{"CPU", 1}}, {{"GPU", inf}}}, ray::PlacementStrategy::PACK, {"bundle 2", "finite"}},
      {{{{"", 1}}}, ray::PlacementStrategy::PACK, {"bundle 0", "empty name"}},
      {two_cpus_, ray::PlacementStrategy::UNRECOGNIZED, {"strategy is UNRECOGNIZED"}},
      {two_cpus_, static_cast<ray::PlacementStrategy>(7), {"strategy", "out of range (7)"}},
  };
  for (const Case& c : cases) {
    std::string error = ErrorOf([&] { Create("named", c.bundles, c.strategy); });
    EXPECT_CONTAINS(error, "ray::CreatePlacementGroup");
    for (const std::string& part : c.said) EXPECT_CONTAINS(error, part);
  }
  EXPECT_TRUE(ray::GetAllPlacementGroups().empty()) << "a refused group was registered";
  EXPECT_TRUE(ray::GetPlacementGroup("named").Empty());
}

TEST_F(LocalModePlacementGroupTest, NamesAreUniqueInTheNamespaceUntilRemoved) {
  ray::PlacementGroup first = Create("g", two_cpus_);
  std::string error = ErrorOf([&] { Create("g", {{{"CPU", 1}}}); });
  EXPECT_CONTAINS(error, "'g'");
  EXPECT_CONTAINS(error, "'pg-ns'");
  ray::PlacementGroup found = ray::GetPlacementGroup("g");
  EXPECT_EQ(found.GetID(), first.GetID());
  EXPECT_EQ(found.GetBundles(), two_cpus_);
  EXPECT_EQ(found.GetState(), ray::PlacementGroupState::CREATED);
  // Unnamed groups never clash.
  Create("", two_cpus_);
  Create("", two_cpus_);
  ray::RemovePlacementGroup(first.GetID());
  EXPECT_TRUE(ray::GetPlacementGroup("g").Empty());
  ray::PlacementGroup second = Create("g", two_cpus_);  // the name is free again
  EXPECT_NE(second.GetID(), first.GetID());
  EXPECT_EQ(ray::GetPlacementGroup("g").GetID(), second.GetID());
}

TEST_F(LocalModePlacementGroupTest, RemoveAndTheLookups) {
  ray::PlacementGroup kept = Create("kept", two_cpus_, ray::PlacementStrategy::STRICT_PACK);
  ray::PlacementGroup removed = Create("removed", {{{"GPU", 1}}});
  ray::RemovePlacementGroup(removed.GetID());
  ray::RemovePlacementGroup(removed.GetID());  // again: nothing happens

  ray::PlacementGroup by_id = ray::GetPlacementGroupById(removed.GetID());
  EXPECT_EQ(by_id.GetState(), ray::PlacementGroupState::REMOVED);
  EXPECT_EQ(by_id.GetName(), "removed");
  EXPECT_EQ(removed.GetState(), ray::PlacementGroupState::CREATED) << "GetState is the state when it was made";
  by_id = ray::GetPlacementGroupById(kept.GetID());
  EXPECT_EQ(by_id.GetState(), ray::PlacementGroupState::CREATED);
  EXPECT_EQ(by_id.GetStrategy(), ray::PlacementStrategy::STRICT_PACK);
  EXPECT_EQ(by_id.GetBundles(), two_cpus_);
  EXPECT_TRUE(by_id.Wait(0)) << "a looked-up group waits through the runtime";

  std::vector<ray::PlacementGroup> all = ray::GetAllPlacementGroups();
  ASSERT_EQ(all.size(), 2u);  // removed ones included, in creation order
  EXPECT_EQ(all[0].GetID(), kept.GetID());
  EXPECT_EQ(all[0].GetState(), ray::PlacementGroupState::CREATED);
  EXPECT_EQ(all[1].GetID(), removed.GetID());
  EXPECT_EQ(all[1].GetState(), ray::PlacementGroupState::REMOVED);

  const std::string unknown(18, 'u');
  EXPECT_TRUE(ray::GetPlacementGroupById(unknown).Empty());
  EXPECT_TRUE(ray::GetPlacementGroupById(unknown).GetID().empty());
  EXPECT_TRUE(ray::GetPlacementGroup("nobody").Empty());
  EXPECT_CONTAINS(ErrorOf([&] { ray::RemovePlacementGroup(unknown); }), "never created");
  for (const std::string& malformed : {std::string("abc"), std::string(36, 'f'), std::string()}) {
    EXPECT_CONTAINS(ErrorOf([&] { ray::RemovePlacementGroup(malformed); }), "malformed placement group id");
    EXPECT_CONTAINS(ErrorOf([&] { ray::GetPlacementGroupById(malformed); }), "malformed placement group id");
  }
  EXPECT_CONTAINS(ErrorOf([] { ray::GetPlacementGroup(""); }), "name is empty");
}

TEST_F(LocalModePlacementGroupTest, WaitThrowsForRemovedUnknownAndEmptyGroups) {
  ray::PlacementGroup group = Create("", two_cpus_);
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_CONTAINS(ErrorOf([&] { group.Wait(1); }), "was removed");
  ray::PlacementGroup unknown(std::string(18, 'u'), {"", two_cpus_, ray::PlacementStrategy::PACK});
  EXPECT_CONTAINS(ErrorOf([&] { unknown.Wait(1); }), "never created");
  ray::PlacementGroup empty;
  EXPECT_TRUE(empty.Empty());
  EXPECT_EQ(empty.GetState(), ray::PlacementGroupState::UNRECOGNIZED);
  EXPECT_CONTAINS(ErrorOf([&] { empty.Wait(1); }), "empty");
}

TEST_F(LocalModePlacementGroupTest, SetWaitCallbakReplacesHowWaitWaits) {
  ray::PlacementGroup group = Create("", two_cpus_);
  std::string asked_id;
  int asked_timeout = 0;
  group.SetWaitCallbak([&](const std::string& id, int timeout_seconds) {
    asked_id = id;
    asked_timeout = timeout_seconds;
    return false;
  });
  EXPECT_FALSE(group.Wait(7));
  EXPECT_EQ(asked_id, group.GetID());
  EXPECT_EQ(asked_timeout, 7);
}

TEST_F(LocalModePlacementGroupTest, TasksRunInABundleWhoseIndexIsChecked) {
  ray::PlacementGroup group = Create("", two_cpus_);
  EXPECT_EQ(*ray::Task(BundleTen).SetPlacementGroup(group, 0).Remote().Get(), 10);
  EXPECT_EQ(*ray::Task(BundlePlus).SetPlacementGroup(group, 1).Remote(1, 2).Get(), 3);
  EXPECT_EQ(*ray::Task(BundleTen).SetPlacementGroup(group, -1).Remote().Get(), 10);  // any bundle
  auto caller = ray::Task(BundleTen).SetPlacementGroup(group, 2);  // setting it does not throw
  std::string error = ErrorOf([&] { caller.Remote(); });
  EXPECT_CONTAINS(error, "bundle_index 2");
  EXPECT_CONTAINS(error, "2 bundle(s)");
  EXPECT_CONTAINS(error, ray::internal::HexId(group.GetID()));
  EXPECT_CONTAINS(ErrorOf([&] { ray::Task(BundleTen).SetPlacementGroup(group, -2).Remote(); }), "bundle_index -2");
  EXPECT_CONTAINS(ErrorOf([&] { ray::Task(BundleTen).SetPlacementGroup(ray::PlacementGroup(), 0).Remote(); }),
                  "placement group is empty");
  // A group object with more bundles than the runtime's own record of the group.
  ray::PlacementGroup stale(group.GetID(), {"", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                                            ray::PlacementStrategy::PACK});
  EXPECT_CONTAINS(ErrorOf([&] { ray::Task(BundleTen).SetPlacementGroup(stale, 2).Remote().Get(); }), "no bundle 2");
}

TEST_F(LocalModePlacementGroupTest, ActorsLiveInABundleWhoseIndexIsChecked) {
  ray::PlacementGroup group = Create("", two_cpus_);
  auto counter = ray::Actor(BundleCounter::Create).SetPlacementGroup(group, 1).Remote(5);
  EXPECT_EQ(*counter.Task(&BundleCounter::Add).Remote(1).Get(), 6);
  std::string error = ErrorOf([&] { ray::Actor(BundleCounter::Create).SetPlacementGroup(group, 3).Remote(0); });
  EXPECT_CONTAINS(error, "bundle_index 3");
  EXPECT_CONTAINS(error, "2 bundle(s)");
  EXPECT_CONTAINS(
      ErrorOf([&] { ray::Actor(BundleCounter::Create).SetPlacementGroup(ray::PlacementGroup(), -1).Remote(0); }),
      "placement group is empty");
}

TEST_F(LocalModePlacementGroupTest, ARemovedGroupFailsItsTasksAndKillsItsActors) {
  ray::PlacementGroup group = Create("doomed", two_cpus_);
  const std::string hex = ray::internal::HexId(group.GetID());
  auto alive = ray::Actor(BundleCounter::Create).SetPlacementGroup(group, 0).Remote(0);
  EXPECT_EQ(*alive.Task(&BundleCounter::Add).Remote(1).Get(), 1);
  // A task queued behind an argument when the group goes fails instead of running.
  auto blocker = ray::Task(Blocked).Remote();
  auto queued = ray::Task(BundlePlus).SetPlacementGroup(group, 1).Remote(blocker, 1);
  ray::RemovePlacementGroup(group.GetID());
  Release();
  EXPECT_EQ(*blocker.Get(), 1);
  std::string error = ErrorOf([&] { queued.Get(); });
  EXPECT_CONTAINS(error, hex);
  EXPECT_CONTAINS(error, "was removed");

  error = ErrorOf([&] { alive.Task(&BundleCounter::Add).Remote(1).Get(); }, false);
  EXPECT_CONTAINS(error, hex);
  EXPECT_THROW(alive.Task(&BundleCounter::Add).Remote(1).Get(), RayActorException);

  // Tasks and actors placed in it later fail the same way.
  error = ErrorOf([&] { ray::Task(BundleTen).SetPlacementGroup(group, 0).Remote().Get(); });
  EXPECT_CONTAINS(error, hex);
  EXPECT_CONTAINS(error, "was removed");
  auto late = ray::Actor(BundleCounter::Create).SetPlacementGroup(group, -1).Remote(0);
  EXPECT_THROW(late.Task(&BundleCounter::Add).Remote(1).Get(), RayActorException);
  // A group never created (a PlacementGroup built by hand) fails them too.
  ray::PlacementGroup unknown(std::string(18, 'u'), {"", two_cpus_, ray::PlacementStrategy::PACK});
  EXPECT_CONTAINS(ErrorOf([&] { ray::Task(BundleTen).SetPlacementGroup(unknown, 0).Remote().Get(); }), "never created");
  // Work outside the group is not affected.
  EXPECT_EQ(*ray::Task(BundleTen).Remote().Get(), 10);
}

TEST(LocalPlacementGroupsTest, NamesArePerNamespace) {
  ray::internal::LocalPlacementGroups groups("0123456789abcdef");
  ray::PlacementGroupCreationOptions options{"shared", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK};
  ray::internal::PlacementGroupInfo a = groups.Create(options, "ns-a");
  ray::internal::PlacementGroupInfo b = groups.Create(options, "ns-b");
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.id.size(), 18u);
  EXPECT_EQ(groups.GetByName("shared", "ns-a")->id, a.id);
  EXPECT_EQ(groups.GetByName("shared", "ns-b")->id, b.id);
  EXPECT_FALSE(groups.GetByName("shared", "ns-c"));
  EXPECT_THROW(groups.Create(options, "ns-a"), RayException);
  groups.Remove(a.id);
  EXPECT_FALSE(groups.GetByName("shared", "ns-a"));
  EXPECT_EQ(groups.GetByName("shared", "ns-b")->id, b.id);
  EXPECT_EQ(groups.Get(a.id)->state, ray::PlacementGroupState::REMOVED);
  EXPECT_EQ(groups.GetAll().size(), 2u);
  EXPECT_FALSE(groups.Unusable({b.id, 0}));
  EXPECT_FALSE(groups.Unusable({"", 5})) << "no group: nothing to check";
  EXPECT_CONTAINS(*groups.Unusable({a.id, 0}), "was removed");
  EXPECT_CONTAINS(*groups.Unusable({b.id, 1}), "no bundle 1");
}

TEST(PlacementGroupApiTest, EveryFunctionNeedsInit) {
  ASSERT_EQ(ray::internal::GetRayRuntime(), nullptr);
  ray::PlacementGroupCreationOptions options{"", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK};
  EXPECT_CONTAINS(ErrorOf([&] { ray::CreatePlacementGroup(options); }), "ray::CreatePlacementGroup");
  EXPECT_THROW(ray::RemovePlacementGroup(std::string(18, 'x')), RayException);
  EXPECT_THROW(ray::GetPlacementGroupById(std::string(18, 'x')), RayException);
  EXPECT_THROW(ray::GetPlacementGroup("g"), RayException);
  EXPECT_THROW(ray::GetAllPlacementGroups(), RayException);
  ray::PlacementGroup group(std::string(18, 'x'), options);
  EXPECT_THROW(group.Wait(1), RayException);
}

TEST(PlacementGroupApiTest, WhatTheRuntimeIsHanded) {
  manta::testing::ScopedFakeRuntime fake;
  ray::PlacementGroupCreationOptions options{"g", {{{"CPU", 2}}, {{"GPU", 1}}}, ray::PlacementStrategy::STRICT_SPREAD};
  ray::PlacementGroup group = ray::CreatePlacementGroup(options);
  EXPECT_EQ(group.GetState(), ray::PlacementGroupState::PENDING);
  ASSERT_EQ(fake->created_groups().size(), 1u);
  EXPECT_EQ(fake->created_groups()[0].bundles, options.bundles);
  EXPECT_EQ(fake->created_groups()[0].strategy, ray::PlacementStrategy::STRICT_SPREAD);
  // Refused options never reach the runtime.
  options.bundles.clear();
  EXPECT_THROW(ray::CreatePlacementGroup(options), RayException);
  EXPECT_EQ(fake->created_groups().size(), 1u);

  // Wait hands over milliseconds; a negative timeout only looks.
  EXPECT_TRUE(group.Wait(3));
  EXPECT_TRUE(group.Wait(-5));
  ASSERT_EQ(fake->group_waits().size(), 2u);
  EXPECT_EQ(fake->group_waits()[0], std::make_pair(group.GetID(), int64_t{3000}));
  EXPECT_EQ(fake->group_waits()[1].second, 0);

  ray::RemovePlacementGroup(group.GetID());
  EXPECT_EQ(fake->removed_groups(), std::vector<std::string>{group.GetID()});

  // Placements reach the task and actor options; without one, the group id is empty.
  ray::Task(BundleTen).SetPlacementGroup(group, 1).Remote();
  ray::Task(BundleTen).Remote();
  ray::Actor(BundleCounter::Create).SetPlacementGroup(group, -1).Remote(0);
  ASSERT_EQ(fake->tasks().size(), 3u);
  EXPECT_EQ(fake->tasks()[0].options.placement.group_id, group.GetID());
  EXPECT_EQ(fake->tasks()[0].options.placement.bundle_index, 1);
  EXPECT_TRUE(fake->tasks()[1].options.placement.group_id.empty());
  ASSERT_EQ(fake->created_actors().size(), 1u);
  EXPECT_EQ(fake->created_actors()[0].placement.group_id, group.GetID());
  EXPECT_EQ(fake->created_actors()[0].placement.bundle_index, -1);
}

}  // namespace
}  // namespace local_mode_placement_group_test
