// The function registry: RAY_REMOTE names, RAY_FUNC overloads, invokers, conflicts,
// and what ray::Task(f).Remote sends (checked against a FakeRuntime).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ray/api.h"
#include "tests/api/fake_runtime.h"

namespace {

int Plus(int a, int b) { return a + b; }
int Overloaded(int a) { return a * 10; }
int Overloaded(int a, int b) { return a * 100 + b; }
std::string Concat(const std::string& a, std::string b) { return a + b; }
void Nothing() {}
int Unregistered(int a) { return a; }
int PlusOneNoexcept(int a) noexcept { return a + 1; }
int TakesRef(ray::ObjectRef<int> ref) { return ref.IsNil() ? -1 : 1; }
int Seven() { return 7; }

}  // namespace

namespace other {
int Seven() { return 70; }
}  // namespace other

RAY_REMOTE(Plus, RAY_FUNC(Overloaded, int), RAY_FUNC(Overloaded, int, int));
RAY_REMOTE(Concat, Nothing, PlusOneNoexcept, TakesRef);
RAY_REMOTE(Plus);  // the same function again: fine
RAY_REMOTE(Seven, other::Seven);

namespace {

using ray::internal::FunctionManager;
using ray::internal::ObjectData;
using ray::internal::SerializedValue;

std::string Bytes(const SerializedValue& value) {
  std::string bytes(value.size, '\0');
  value.write(bytes.data());
  return bytes;
}

TEST(FunctionManagerTest, NamesComeFromTheSpelling) {
  FunctionManager& fm = FunctionManager::Instance();
  EXPECT_EQ(fm.GetFunctionName(&Plus), "Plus");
  EXPECT_EQ(fm.GetFunctionName(RAY_FUNC(Overloaded, int)), "Overloaded(int)");
  EXPECT_EQ(fm.GetFunctionName(RAY_FUNC(Overloaded, int, int)), "Overloaded(int,int)");
  EXPECT_EQ(fm.GetFunctionName(&Nothing), "Nothing");
  EXPECT_EQ(fm.GetFunctionName(&PlusOneNoexcept), "PlusOneNoexcept");
  EXPECT_EQ(fm.GetFunctionName(&other::Seven), "other::Seven");
  EXPECT_EQ(fm.GetFunctionName(&Unregistered), "");
  EXPECT_NE(fm.GetFunction("Concat"), nullptr);
  EXPECT_EQ(fm.GetFunction("Unregistered"), nullptr);
}

TEST(FunctionManagerTest, SplitsAndNormalizesNames) {
  EXPECT_EQ(ray::internal::SplitRemoteFunctionNames(" a ,ns::b,RAY_FUNC( f , unsigned int, const std::map<int, int> &)"),
            (std::vector<std::string>{"a", "ns::b", "f(unsigned int,const std::map<int,int>&)"}));
  EXPECT_EQ(ray::internal::SplitRemoteFunctionNames("RAY_FUNC(g)"), (std::vector<std::string>{"g()"}));
}

TEST(FunctionManagerTest, InvokerDecodesArgumentsAndEncodesTheResult) {
  const ray::internal::RemoteFunction* plus = FunctionManager::Instance().GetFunction("Plus");
  ASSERT_NE(plus, nullptr);
  std::string a = Bytes(ray::internal::SerializeCopy(2)), b = Bytes(ray::internal::SerializeCopy(40));
  SerializedValue result = (*plus)({ObjectData{a.data(), a.size(), nullptr, ""}, ObjectData{b.data(), b.size(), nullptr, ""}});
  std::string bytes = Bytes(result);
  EXPECT_EQ(bytes, Bytes(ray::internal::SerializeCopy(42)));

  const ray::internal::RemoteFunction* overloaded = FunctionManager::Instance().GetFunction("Overloaded(int,int)");
  ASSERT_NE(overloaded, nullptr);
  EXPECT_EQ(Bytes((*overloaded)({ObjectData{a.data(), a.size(), nullptr, ""}, ObjectData{b.data(), b.size(), nullptr, ""}})),
            Bytes(ray::internal::SerializeCopy(240)));

  // A void function's result is msgpack nil.
  EXPECT_EQ(Bytes((*FunctionManager::Instance().GetFunction("Nothing"))({})), std::string(1, static_cast<char>(0xc0)));
}

TEST(FunctionManagerTest, InvokerRejectsWrongArgumentCountAndTypes) {
  const ray::internal::RemoteFunction* plus = FunctionManager::Instance().GetFunction("Plus");
  std::string a = Bytes(ray::internal::SerializeCopy(std::string("text")));
  ObjectData arg{a.data(), a.size(), nullptr, ""};
  try {
    (*plus)({arg});
    FAIL();
  } catch (const ray::internal::RayException& e) {
    EXPECT_EQ(std::string(e.what()), "Plus takes 2 argument(s) but the task carries 1");
  }
  try {
    (*plus)({arg, arg});
    FAIL();
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("Plus: argument #1: the bytes do not decode as int"), std::string::npos)
        << e.what();
  }
}

TEST(FunctionManagerTest, ConflictingRegistrationAborts) {
  EXPECT_DEATH(FunctionManager::Instance().RegisterFunction("Plus", ray::internal::KeyOfFunction(&Unregistered),
                                                            ray::internal::RemoteFunction()),
               "the name \"Plus\" is registered for two different functions");
}

TEST(TaskCallerTest, RemoteBeforeInitThrows) {
  try {
    ray::Task(Plus).Remote(1, 2);
    FAIL();
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("ray::Init() has not been called"), std::string::npos) << e.what();
  }
}

TEST(TaskCallerTest, UnregisteredFunctionThrowsRayFunctionNotFound) {
  manta::testing::ScopedFakeRuntime fake;
  try {
    ray::Task(Unregistered).Remote(1);
    FAIL();
  } catch (const ray::internal::RayFunctionNotFound& e) {
    EXPECT_NE(std::string(e.what()).find("is not registered as a remote function"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RAY_REMOTE"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fake->tasks().empty());
}

// As Ray: the caller of a function RAY_REMOTE never registered cannot even be made
// (Ray's own tests check this), with or without a runtime.
TEST(TaskCallerTest, MakingACallerOfAnUnregisteredFunctionThrowsARayException) {
  EXPECT_THROW(ray::Task(Unregistered), ray::internal::RayException);
  manta::testing::ScopedFakeRuntime fake;
  EXPECT_THROW(ray::Task(Unregistered).SetName("x"), ray::internal::RayFunctionNotFound);
  EXPECT_NO_THROW(ray::Task(Plus));
}

// Ray's TaskOptionsCheckTest, case by case.
TEST(TaskOptionsTest, CheckTaskOptionsRefusesWhatRayRefuses) {
  using ray::internal::CheckTaskOptions;
  using ray::internal::RayException;
  EXPECT_THROW(CheckTaskOptions({{"", 1}}), RayException);
  EXPECT_THROW(CheckTaskOptions({{"dummy", 0}}), RayException);
  EXPECT_NO_THROW(CheckTaskOptions({{"dummy", 2.0}}));
  EXPECT_THROW(CheckTaskOptions({{"dummy", 2.0}, {"dummy1", 2.5}}), RayException);
  EXPECT_NO_THROW(CheckTaskOptions({{"dummy", 0.5}}));
  EXPECT_THROW(CheckTaskOptions({{"dummy", -1}}), RayException);
}

TEST(TaskOptionsTest, RemoteChecksTheResourcesBeforeSubmitting) {
  manta::testing::ScopedFakeRuntime fake;
  EXPECT_THROW(ray::Task(Plus).SetResource("GPU", 1.5).Remote(1, 2), ray::internal::RayException);
  EXPECT_TRUE(fake->tasks().empty());
}

class Unnamed {};

// As Ray: no actor has the empty name, so looking it up finds none (no throw).
TEST(GetActorTest, AnEmptyNameFindsNoActor) {
  manta::testing::ScopedFakeRuntime fake;
  EXPECT_FALSE(ray::GetActor<Unnamed>(""));
  EXPECT_FALSE(ray::GetActor<Unnamed>("", "some_namespace"));
}

TEST(TaskCallerTest, RemoteSendsValuesRefsAndOptions) {
  manta::testing::ScopedFakeRuntime fake;
  ray::ObjectRef<int> two = ray::Put(2);
  ray::ObjectRef<int> sum =
      ray::Task(Plus).SetName("adder").SetResource("CPU", 2).SetMaxRetries(0).Remote(two, 40L);
  EXPECT_EQ(fake->Refs(sum.ID()), 1);  // adopted, not added
  ASSERT_EQ(fake->tasks().size(), 1u);
  const auto& task = fake->tasks()[0];
  EXPECT_EQ(task.function_name, "Plus");
  EXPECT_EQ(task.options.name, "adder");
  EXPECT_EQ(task.options.resources.at("CPU"), 2);
  EXPECT_EQ(task.options.max_retries, 0);
  ASSERT_EQ(task.args.size(), 2u);
  EXPECT_TRUE(task.args[0].by_ref);
  EXPECT_EQ(task.args[0].object_id, two.ID());
  EXPECT_FALSE(task.args[1].by_ref);
  EXPECT_EQ(Bytes(task.args[1].value), Bytes(ray::internal::SerializeCopy(40)));  // converted to int

  // An ObjectRef for an ObjectRef parameter travels as a value holding the ref.
  ray::Task(TakesRef).Remote(two);
  const auto& by_value = fake->tasks()[1].args[0];
  EXPECT_FALSE(by_value.by_ref);
  EXPECT_EQ(by_value.value.contained_ids, std::vector<std::string>{two.ID()});

  // String literals convert to std::string parameters; overloads by RAY_FUNC.
  ray::Task(Concat).Remote("a", std::string("b"));
  EXPECT_EQ(fake->tasks()[2].function_name, "Concat");
  ray::Task(RAY_FUNC(Overloaded, int)).Remote(1);
  EXPECT_EQ(fake->tasks()[3].function_name, "Overloaded(int)");
  ray::ObjectRef<void> done = ray::Task(Nothing).Remote();
  EXPECT_EQ(fake->tasks()[4].function_name, "Nothing");
  ray::Task(PlusOneNoexcept).Remote(1);
  EXPECT_EQ(fake->tasks()[5].function_name, "PlusOneNoexcept");

  EXPECT_THROW(ray::Task(Plus).Remote(ray::ObjectRef<int>(), 1), ray::internal::RayException);
}

}  // namespace
