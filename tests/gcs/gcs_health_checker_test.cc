// GcsHealthChecker with a scripted check function: the test sees every check sent
// and decides when and how each completes.
#include "src/gcs/gcs_health_checker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Records health checks; the test completes them with Reply(). With
// `reply_inline` set, each check completes before the check function returns.
class ScriptedCheck {
 public:
  GcsHealthChecker::CheckFn AsFunction() {
    return [this](const NodeID& id, std::function<void(absl::Status)> done) {
      ++sent_;
      if (reply_inline.has_value()) {
        done(*reply_inline);
        return;
      }
      pending_.emplace_back(id, std::move(done));
    };
  }

  // Completes the oldest pending check of `id`. Returns false if there is none.
  bool Reply(const NodeID& id, absl::Status status) {
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->first != id) continue;
      auto done = std::move(it->second);
      pending_.erase(it);
      done(std::move(status));
      return true;
    }
    return false;
  }

  size_t pending(const NodeID& id) const {
    size_t n = 0;
    for (const auto& [pending_id, done] : pending_) n += pending_id == id;
    return n;
  }
  int sent() const { return sent_; }

  std::optional<absl::Status> reply_inline;

 private:
  std::deque<std::pair<NodeID, std::function<void(absl::Status)>>> pending_;
  int sent_ = 0;
};

absl::Status Miss() { return absl::DeadlineExceededError("no answer"); }

class GcsHealthCheckerTest : public ::testing::Test {
 protected:
  void Build(int64_t failure_threshold, int64_t initial_delay_ms = 0, int64_t isolation_grace_ms = 0) {
    checker_ = std::make_unique<GcsHealthChecker>(
        check_.AsFunction(),
        [this](const NodeID& id, const std::string& reason) {
          dead_.push_back(id);
          reasons_.push_back(reason);
          if (on_dead_) on_dead_(id);
        },
        failure_threshold, initial_delay_ms, clock_.AsFunction(), isolation_grace_ms);
  }

  // One period: a Tick and then the reply to the check it sent to `id`.
  void CheckAndReply(const NodeID& id, absl::Status status) {
    checker_->Tick();
    ASSERT_TRUE(check_.Reply(id, std::move(status))) << "no check was sent";
  }

  FakeClock clock_;
  ScriptedCheck check_;
  std::vector<NodeID> dead_;
  std::vector<std::string> reasons_;
  std::function<void(const NodeID&)> on_dead_;
  std::unique_ptr<GcsHealthChecker> checker_;
  const NodeID node_ = NodeID::FromRandom();
};

TEST_F(GcsHealthCheckerTest, NodeIsDeadAfterExactlyThresholdConsecutiveMisses) {
  Build(/*failure_threshold=*/3);
  checker_->AddNode(node_);

  CheckAndReply(node_, Miss());
  CheckAndReply(node_, Miss());
  EXPECT_THAT(dead_, IsEmpty());
  EXPECT_TRUE(checker_->IsWatching(node_));

  CheckAndReply(node_, absl::UnavailableError("connection refused"));
  EXPECT_THAT(dead_, ElementsAre(node_));
  EXPECT_THAT(reasons_[0], HasSubstr("3"));
  EXPECT_THAT(reasons_[0], HasSubstr("connection refused"));
  EXPECT_FALSE(checker_->IsWatching(node_));

  // A dead node is not checked (or declared dead) again.
  checker_->Tick();
  EXPECT_EQ(check_.pending(node_), 0u);
  EXPECT_EQ(dead_.size(), 1u);
}

TEST_F(GcsHealthCheckerTest, SuccessResetsTheMissCount) {
  Build(/*failure_threshold=*/3);
  checker_->AddNode(node_);
  CheckAndReply(node_, Miss());
  CheckAndReply(node_, Miss());
  CheckAndReply(node_, absl::OkStatus());
  CheckAndReply(node_, Miss());
  CheckAndReply(node_, Miss());
  EXPECT_THAT(dead_, IsEmpty()) << "only two misses since the last success";
  CheckAndReply(node_, Miss());
  EXPECT_THAT(dead_, ElementsAre(node_));
}

TEST_F(GcsHealthCheckerTest, NoNewCheckWhileOneIsInFlight) {
  Build(/*failure_threshold=*/3);
  checker_->AddNode(node_);
  checker_->Tick();
  checker_->Tick();
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 1);

  ASSERT_TRUE(check_.Reply(node_, absl::OkStatus()));
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 2);
}

TEST_F(GcsHealthCheckerTest, FirstCheckWaitsForTheInitialDelay) {
  Build(/*failure_threshold=*/1, /*initial_delay_ms=*/500);
  checker_->AddNode(node_);
  checker_->Tick();
  clock_.Advance(499);
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 0);

  clock_.Advance(1);
  checker_->Tick();
  EXPECT_EQ(check_.pending(node_), 1u);
}

TEST_F(GcsHealthCheckerTest, RemovedNodeIsNoLongerCheckedAndItsLateReplyIsIgnored) {
  Build(/*failure_threshold=*/1);
  checker_->AddNode(node_);
  checker_->Tick();
  checker_->RemoveNode(node_);
  EXPECT_FALSE(checker_->IsWatching(node_));

  ASSERT_TRUE(check_.Reply(node_, Miss()));
  EXPECT_THAT(dead_, IsEmpty());
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 1);
}

TEST_F(GcsHealthCheckerTest, LateReplyForAnEarlierRegistrationIsIgnored) {
  Build(/*failure_threshold=*/1);
  checker_->AddNode(node_);
  checker_->Tick();  // check #1, for the first registration
  checker_->RemoveNode(node_);
  checker_->AddNode(node_);
  checker_->Tick();  // check #2, for the second
  ASSERT_EQ(check_.pending(node_), 2u);

  ASSERT_TRUE(check_.Reply(node_, Miss()));  // #1 arrives late
  EXPECT_THAT(dead_, IsEmpty());
  EXPECT_TRUE(checker_->IsWatching(node_));
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 2) << "the stale reply must not end #2's flight";

  ASSERT_TRUE(check_.Reply(node_, Miss()));  // #2
  EXPECT_THAT(dead_, ElementsAre(node_));
}

TEST_F(GcsHealthCheckerTest, ReAddingAWatchedNodeStartsAFreshCount) {
  Build(/*failure_threshold=*/2);
  checker_->AddNode(node_);
  CheckAndReply(node_, Miss());
  checker_->AddNode(node_);  // e.g. the node registered again after a GCS restart
  CheckAndReply(node_, Miss());
  EXPECT_THAT(dead_, IsEmpty());
  CheckAndReply(node_, Miss());
  EXPECT_THAT(dead_, ElementsAre(node_));
}

TEST_F(GcsHealthCheckerTest, NodesAreCountedIndependently) {
  Build(/*failure_threshold=*/2);
  NodeID other = NodeID::FromRandom();
  checker_->AddNode(node_);
  checker_->AddNode(other);
  for (int i = 0; i < 2; ++i) {
    checker_->Tick();
    ASSERT_TRUE(check_.Reply(node_, Miss()));
    ASSERT_TRUE(check_.Reply(other, absl::OkStatus()));
  }
  EXPECT_THAT(dead_, ElementsAre(node_));
  EXPECT_TRUE(checker_->IsWatching(other));
}

// Every node on another host misses its checks at once: the GCS host is more likely
// cut off than all of them dead, so none is declared dead within the grace.
TEST_F(GcsHealthCheckerTest, AGcsCutOffFromEveryOtherHostDeclaresNoneDeadWithinTheGrace) {
  Build(/*failure_threshold=*/2, /*initial_delay_ms=*/0, /*isolation_grace_ms=*/10000);
  NodeID local = NodeID::FromRandom();
  NodeID a = NodeID::FromRandom();
  NodeID b = NodeID::FromRandom();
  checker_->AddNode(local, /*remote=*/false);
  checker_->AddNode(a, /*remote=*/true);
  checker_->AddNode(b, /*remote=*/true);
  for (int i = 0; i < 5; ++i) {
    checker_->Tick();
    ASSERT_TRUE(check_.Reply(local, absl::OkStatus()));
    ASSERT_TRUE(check_.Reply(a, Miss()));
    ASSERT_TRUE(check_.Reply(b, Miss()));
    clock_.Advance(1000);
  }
  EXPECT_THAT(dead_, IsEmpty());
  // The cut heals: `a` answers first; `b`'s connection takes a moment longer. The
  // misses of the cut do not count against it.
  checker_->Tick();
  ASSERT_TRUE(check_.Reply(a, absl::OkStatus()));
  ASSERT_TRUE(check_.Reply(b, Miss()));
  ASSERT_TRUE(check_.Reply(local, absl::OkStatus()));
  EXPECT_THAT(dead_, IsEmpty());
  checker_->Tick();
  ASSERT_TRUE(check_.Reply(a, absl::OkStatus()));
  ASSERT_TRUE(check_.Reply(b, absl::OkStatus()));
  ASSERT_TRUE(check_.Reply(local, absl::OkStatus()));
  EXPECT_THAT(dead_, IsEmpty());
  EXPECT_TRUE(checker_->IsWatching(a));
  EXPECT_TRUE(checker_->IsWatching(b));
}

TEST_F(GcsHealthCheckerTest, NodesOfOtherHostsMissingForLongerThanTheGraceAreDeclaredDead) {
  Build(/*failure_threshold=*/2, /*initial_delay_ms=*/0, /*isolation_grace_ms=*/3000);
  NodeID a = NodeID::FromRandom();
  NodeID b = NodeID::FromRandom();
  checker_->AddNode(a, /*remote=*/true);
  checker_->AddNode(b, /*remote=*/true);
  for (int i = 0; i < 5 && dead_.size() < 2; ++i) {
    checker_->Tick();
    ASSERT_TRUE(check_.Reply(a, Miss()));
    if (checker_->IsWatching(b)) {
      ASSERT_TRUE(check_.Reply(b, Miss()));
    }
    clock_.Advance(1000);
  }
  EXPECT_THAT(dead_, ::testing::UnorderedElementsAre(a, b));
}

TEST_F(GcsHealthCheckerTest, OneRemoteNodeOfSeveralFailingIsDeclaredDeadAtOnce) {
  Build(/*failure_threshold=*/2, /*initial_delay_ms=*/0, /*isolation_grace_ms=*/60000);
  NodeID alive = NodeID::FromRandom();
  checker_->AddNode(node_, /*remote=*/true);
  checker_->AddNode(alive, /*remote=*/true);
  for (int i = 0; i < 2; ++i) {
    checker_->Tick();
    ASSERT_TRUE(check_.Reply(node_, Miss()));
    ASSERT_TRUE(check_.Reply(alive, absl::OkStatus()));
  }
  EXPECT_THAT(dead_, ElementsAre(node_));
}

TEST_F(GcsHealthCheckerTest, ThresholdBelowOneMeansOneMiss) {
  Build(/*failure_threshold=*/0);
  checker_->AddNode(node_);
  CheckAndReply(node_, Miss());
  EXPECT_THAT(dead_, ElementsAre(node_));
}

TEST_F(GcsHealthCheckerTest, ChecksCompletingInlineDoNotBreakTheTick) {
  // Each inline failure erases its node, and on_dead adds a new one, while Tick is
  // still sending checks to the others.
  Build(/*failure_threshold=*/1);
  std::vector<NodeID> nodes;
  for (int i = 0; i < 50; ++i) {
    nodes.push_back(NodeID::FromRandom());
    checker_->AddNode(nodes.back());
  }
  std::vector<NodeID> added;
  on_dead_ = [&](const NodeID&) {
    added.push_back(NodeID::FromRandom());
    checker_->AddNode(added.back());
  };
  check_.reply_inline = Miss();
  checker_->Tick();

  EXPECT_EQ(check_.sent(), 50);
  EXPECT_THAT(dead_, ::testing::UnorderedElementsAreArray(nodes));
  for (const NodeID& id : nodes) EXPECT_FALSE(checker_->IsWatching(id));
  for (const NodeID& id : added) EXPECT_TRUE(checker_->IsWatching(id));

  // Inline successes leave every node watched and ready for the next Tick.
  check_.reply_inline = absl::OkStatus();
  checker_->Tick();
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 50 + 2 * 50);
  EXPECT_EQ(dead_.size(), 50u);
}

TEST_F(GcsHealthCheckerTest, WithAPeriodEachNodeIsCheckedOnceAPeriodAtItsOwnPhase) {
  checker_ = std::make_unique<GcsHealthChecker>(
      check_.AsFunction(), [this](const NodeID& id, const std::string&) { dead_.push_back(id); },
      /*failure_threshold=*/3, /*initial_delay_ms=*/0, clock_.AsFunction(), /*isolation_grace_ms=*/0,
      /*period_ms=*/1000);
  std::vector<NodeID> nodes;
  for (int i = 0; i < 200; ++i) {
    nodes.push_back(NodeID::FromRandom());
    checker_->AddNode(nodes.back());
  }
  // Ticks every 100 ms (between whole milliseconds' phases, at 50, 150, ...) for
  // three periods, each check answered before the next tick: the ticks that checked
  // each node.
  absl::flat_hash_map<NodeID, std::vector<int>> ticks_of;
  int busiest = 0;
  clock_.Advance(50);
  for (int tick = 0; tick < 30; ++tick) {
    const int before = check_.sent();
    checker_->Tick();
    busiest = std::max(busiest, check_.sent() - before);
    for (const NodeID& id : nodes) {
      if (check_.pending(id) == 0) continue;
      ticks_of[id].push_back(tick);
      ASSERT_TRUE(check_.Reply(id, absl::OkStatus()));
    }
    clock_.Advance(100);
  }
  for (const NodeID& id : nodes) {
    const std::vector<int>& ticks = ticks_of[id];
    ASSERT_GE(ticks.size(), 2u) << id.Hex();
    EXPECT_LE(ticks[0], 10) << "first checked within a period";
    for (size_t i = 1; i < ticks.size(); ++i) EXPECT_EQ(ticks[i], ticks[i - 1] + 10) << "once a period, same phase";
  }
  // 200 nodes over 10 ticks: 20 a tick on average. Without phases one tick would
  // send all 200.
  EXPECT_LT(busiest, 60);
  EXPECT_THAT(dead_, IsEmpty());
}

TEST_F(GcsHealthCheckerTest, WithAPeriodALateTickSendsOneCheckNotTheMissedOnes) {
  checker_ = std::make_unique<GcsHealthChecker>(
      check_.AsFunction(), [this](const NodeID& id, const std::string&) { dead_.push_back(id); },
      /*failure_threshold=*/3, /*initial_delay_ms=*/0, clock_.AsFunction(), /*isolation_grace_ms=*/0,
      /*period_ms=*/100);
  checker_->AddNode(node_);
  clock_.Advance(100);
  CheckAndReply(node_, absl::OkStatus());
  clock_.Advance(1000);  // the loop stalled for ten periods
  CheckAndReply(node_, absl::OkStatus());
  checker_->Tick();
  EXPECT_EQ(check_.sent(), 2) << "the next check waits for the node's next phase";
  clock_.Advance(100);
  CheckAndReply(node_, absl::OkStatus());
  EXPECT_EQ(check_.sent(), 3);
}

}  // namespace
}  // namespace manta::gcs::testing
