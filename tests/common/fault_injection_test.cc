// Tests of the RPC fault-injection spec (src/common/rpc/fault_injection.h).
#include "src/common/rpc/fault_injection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace manta::rpc {
namespace {

using ::testing::HasSubstr;

FaultInjector MustParse(const std::string& spec) {
  absl::StatusOr<FaultInjector> injector = FaultInjector::Parse(spec);
  EXPECT_TRUE(injector.ok()) << spec << ": " << injector.status();
  return injector.ok() ? *injector : FaultInjector();
}

TEST(FaultInjectionTest, EmptySpecInjectsNothing) {
  FaultInjector injector = MustParse("");
  EXPECT_TRUE(injector.empty());
  EXPECT_EQ(injector.Decide("HealthCheck").kind, FaultKind::kNone);
  EXPECT_TRUE(MustParse(" , ").empty());
}

TEST(FaultInjectionTest, ParsesEachAction) {
  FaultInjector injector = MustParse("A=drop_request, B=drop_reply,C=delay:250");
  EXPECT_FALSE(injector.empty());
  EXPECT_EQ(injector.Decide("A").kind, FaultKind::kDropRequest);
  EXPECT_EQ(injector.Decide("B").kind, FaultKind::kDropReply);
  FaultDecision c = injector.Decide("C");
  EXPECT_EQ(c.kind, FaultKind::kDelay);
  EXPECT_EQ(c.delay_ms, 250);
}

TEST(FaultInjectionTest, NonMatchingMethodIsUntouched) {
  FaultInjector injector = MustParse("HealthCheck=drop_request");
  EXPECT_EQ(injector.Decide("RegisterNode").kind, FaultKind::kNone);
  EXPECT_EQ(injector.Decide("healthcheck").kind, FaultKind::kNone);  // exact names only
  EXPECT_EQ(injector.Decide("HealthCheck").kind, FaultKind::kDropRequest);
}

TEST(FaultInjectionTest, StarMatchesEveryMethod) {
  FaultInjector injector = MustParse("*=drop_reply");
  EXPECT_EQ(injector.Decide("HealthCheck").kind, FaultKind::kDropReply);
  EXPECT_EQ(injector.Decide("AnythingElse").kind, FaultKind::kDropReply);
}

TEST(FaultInjectionTest, FirstMatchingRuleWins) {
  FaultInjector injector = MustParse("HealthCheck=delay:5,*=drop_request");
  EXPECT_EQ(injector.Decide("HealthCheck").kind, FaultKind::kDelay);
  EXPECT_EQ(injector.Decide("RegisterNode").kind, FaultKind::kDropRequest);
}

TEST(FaultInjectionTest, ProbabilityZeroNeverFires) {
  FaultInjector injector = MustParse("HealthCheck=drop_request@0");
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(injector.Decide("HealthCheck").kind, FaultKind::kNone);
}

TEST(FaultInjectionTest, ProbabilityOneAlwaysFires) {
  FaultInjector injector = MustParse("HealthCheck=drop_reply@1");
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(injector.Decide("HealthCheck").kind, FaultKind::kDropReply);
}

TEST(FaultInjectionTest, ProbabilityHalfFiresSometimes) {
  FaultInjector injector = MustParse("X=drop_request@0.5");
  int fired = 0;
  for (int i = 0; i < 2000; ++i) fired += injector.Decide("X").kind == FaultKind::kDropRequest;
  // Binomial(2000, 0.5): outside [800, 1200] has probability far below 1e-15.
  EXPECT_GT(fired, 800);
  EXPECT_LT(fired, 1200);
}

TEST(FaultInjectionTest, ZeroProbabilityRuleFallsThroughToTheNext) {
  FaultInjector injector = MustParse("X=drop_request@0,*=delay:3");
  FaultDecision d = injector.Decide("X");
  EXPECT_EQ(d.kind, FaultKind::kDelay);
  EXPECT_EQ(d.delay_ms, 3);
}

TEST(FaultInjectionTest, CopiesKeepTheRules) {
  FaultInjector original = MustParse("X=drop_reply");
  FaultInjector copy = original;
  EXPECT_EQ(copy.Decide("X").kind, FaultKind::kDropReply);
  FaultInjector assigned;
  assigned = original;
  EXPECT_EQ(assigned.Decide("X").kind, FaultKind::kDropReply);
}

TEST(FaultInjectionTest, BadSpecsAreErrors) {
  for (const std::string spec : {
           "HealthCheck",                 // no '='
           "=drop_request",               // no method
           "HealthCheck=",                // no action
           "HealthCheck=explode",         // unknown action
           "HealthCheck=delay:",          // no delay
           "HealthCheck=delay:abc",       // non-numeric delay
           "HealthCheck=delay:-5",        // negative delay
           "HealthCheck=drop_reply@1.5",  // probability above 1
           "HealthCheck=drop_reply@-0.1", // probability below 0
           "HealthCheck=drop_reply@x",    // non-numeric probability
           "A=drop_request,B=oops",       // one bad entry among good ones
       }) {
    absl::StatusOr<FaultInjector> injector = FaultInjector::Parse(spec);
    ASSERT_FALSE(injector.ok()) << spec;
    EXPECT_EQ(injector.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

TEST(FaultInjectionTest, ErrorNamesTheBadEntry) {
  absl::StatusOr<FaultInjector> injector = FaultInjector::Parse("A=drop_request,B=oops");
  ASSERT_FALSE(injector.ok());
  EXPECT_THAT(std::string(injector.status().message()), HasSubstr("B=oops"));
}

}  // namespace
}  // namespace manta::rpc
