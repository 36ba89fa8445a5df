// Readers' fetches take turns for room in the store: the first always goes, the
// others while they fit beside those started and not done, first come first.
#include "src/raylet/fetch_admission.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test_util/test_util.h"

namespace manta::raylet {
namespace {

class FetchAdmissionTest : public ::testing::Test {
 protected:
  // Queues a fetch of `bytes` named `name`; its `done` is kept to be run later.
  void Add(const std::string& name, int64_t bytes) {
    admission_.Add(bytes, [this, name](FetchAdmission::Done done) {
      started_.push_back(name);
      dones_[name] = std::move(done);
    });
  }
  void Finish(const std::string& name) { std::move(dones_.at(name))(); }

  EventLoop loop_;
  int64_t room_ = 100;
  FetchAdmission admission_{loop_, [this] { return room_; }, /*poll_ms=*/1};
  std::vector<std::string> started_;
  std::map<std::string, FetchAdmission::Done> dones_;
};

TEST_F(FetchAdmissionTest, FetchesStartWhileTheyFitAndNoneOvertakes) {
  Add("a", 60);
  Add("b", 30);
  EXPECT_EQ(started_, (std::vector<std::string>{"a", "b"}));
  Add("c", 20);  // 60 + 30 + 20 > 100: waits
  Add("d", 5);   // would fit, but does not overtake c
  EXPECT_EQ(started_.size(), 2u);
  EXPECT_EQ(admission_.num_waiting(), 2u);
  EXPECT_EQ(admission_.active_bytes(), 90);
  Finish("a");
  EXPECT_EQ(started_, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(admission_.active_bytes(), 55);
  Finish("b");
  EXPECT_EQ(admission_.num_active(), 2u);  // c and d
  EXPECT_EQ(admission_.active_bytes(), 25);
}

TEST_F(FetchAdmissionTest, TheFirstGoesWhateverItsSizeAndTheNextWaitsForIt) {
  room_ = 10;
  Add("big", 500);
  Add("small", 1);
  EXPECT_EQ(started_, (std::vector<std::string>{"big"}));
  Finish("big");
  EXPECT_EQ(started_, (std::vector<std::string>{"big", "small"}));
}

TEST_F(FetchAdmissionTest, RoomFreedByOthersIsSeenWithoutAFetchEnding) {
  Add("a", 50);
  room_ = 40;  // workers hold more of the store now
  Add("b", 40);
  EXPECT_EQ(started_.size(), 1u);
  room_ = 100;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        loop_.RunUntilIdle();
        return started_.size() == 2;
      },
      5000));
  EXPECT_EQ(admission_.num_waiting(), 0u);
}

TEST_F(FetchAdmissionTest, AFetchDoneAtOnceLetsTheNextStart) {
  for (int i = 0; i < 1000; ++i) {
    admission_.Add(1000, [this](FetchAdmission::Done done) {
      started_.push_back("x");
      std::move(done)();  // its objects were all here
    });
  }
  EXPECT_EQ(started_.size(), 1000u);
  EXPECT_EQ(admission_.num_active(), 0u);
  EXPECT_EQ(admission_.num_waiting(), 0u);
}

}  // namespace
}  // namespace manta::raylet
