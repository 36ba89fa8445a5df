// A program written the way Ray's C++ users (and Ray's own C++ cluster tests) write
// them, built unchanged against Manta: plain TEST()s that call ray::Init and
// ray::Shutdown themselves, factories chosen with RAY_FUNC, handles kept as members,
// passed to and returned from actors, named actors in namespaces, detached child
// actors, kill and restart, ExitActor, threaded actors, infeasible actors, exception
// types, nested refs and byte vectors, placement groups. No Manta header is included.
#include <gtest/gtest.h>
#include <ray/api.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "counter.h"

int cmd_argc = 0;
char** cmd_argv = nullptr;

int Return1() { return 1; }
int Plus1(int x) { return x + 1; }
int Plus(int x, int y) { return x + y; }
std::string GetNamespaceInTask() { return ray::GetNamespace(); }
void ThrowTask() { throw std::logic_error("error"); }
std::string GetEnvVar(std::string key) {
  const char* value = std::getenv(key.c_str());
  return value == nullptr ? "" : value;
}
RAY_REMOTE(Return1, Plus1, Plus, GetNamespaceInTask, ThrowTask, GetEnvVar);

namespace {
// Polls `done` for up to `seconds` (the program's own helper, not Manta's).
template <typename F>
bool Eventually(F done, int seconds = 20) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}
}  // namespace

TEST(RayCompatTest, Initialized) {
  ray::Init();
  EXPECT_TRUE(ray::IsInitialized());
  ray::Init();  // again: nothing happens
  EXPECT_TRUE(ray::IsInitialized());
  ray::Shutdown();
  EXPECT_FALSE(ray::IsInitialized());
}

TEST(RayCompatTest, ActorsTasksAndArguments) {
  ray::RayConfig config;
  config.head_args = {"--num-cpus", "2", "--resources", "{\"resource1\":1,\"resource2\":2}"};
  ray::Init(config, cmd_argc, cmd_argv);

  ray::ActorHandle<Counter> actor =
      ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetMaxRestarts(1).SetName("named_actor").Remote();
  EXPECT_TRUE(*actor.Task(&Counter::Initialized).Remote().Get());
  EXPECT_EQ(1, *actor.Task(&Counter::Plus1).SetName("named_actor_task").SetResources({{"CPU", 1.0}}).Remote().Get());

  auto named = ray::GetActor<Counter>("named_actor");
  ASSERT_TRUE(named);
  auto& named_actor_handle = *named;
  EXPECT_EQ(2, *named_actor_handle.Task(&Counter::Plus1).Remote().Get());
  EXPECT_FALSE(ray::GetActor<Counter>("not_exist_actor"));
  EXPECT_FALSE(*named_actor_handle.Task(&Counter::CheckRestartInActorCreationTask).Remote().Get());
  named_actor_handle.Kill(false);
  EXPECT_EQ(1, *named_actor_handle.Task(&Counter::Plus1).Remote().Get());
  EXPECT_TRUE(*named_actor_handle.Task(&Counter::CheckRestartInActorCreationTask).Remote().Get());
  EXPECT_TRUE(*named_actor_handle.Task(&Counter::CheckRestartInActorTask).Remote().Get());
  named_actor_handle.Kill();
  EXPECT_THROW(named_actor_handle.Task(&Counter::Plus1).Remote().Get(), ray::internal::RayActorException);
  EXPECT_FALSE(ray::GetActor<Counter>("named_actor"));

  auto actor2 = ray::Actor(RAY_FUNC(Counter::FactoryCreate, int)).Remote(1);
  auto actor_object2 = actor2.Task(&Counter::Add).Remote(5);
  EXPECT_EQ(6, *ray::Get(actor_object2));
  auto actor3 = ray::Actor(RAY_FUNC(Counter::FactoryCreate, int, int)).Remote(6, 0);
  EXPECT_EQ(12, *actor3.Task(&Counter::Add).Remote(actor_object2).Get());

  auto r10 = ray::Task(Plus).Remote(ray::Task(Plus1).Remote(ray::Task(Return1).Remote()), 25);
  auto actor5 = ray::Actor(RAY_FUNC(Counter::FactoryCreate, int, int)).Remote(r10, 0);
  auto r11 = actor5.Task(&Counter::Add).Remote(ray::Task(Return1).Remote());
  auto r12 = actor5.Task(&Counter::Add).Remote(r11);
  EXPECT_EQ(28, *r11.Get());
  EXPECT_EQ(56, *r12.Get());

  EXPECT_EQ("hello", *actor2.Task(&Counter::GetVal).Remote(ray::Put(std::string("hello"))).Get());
  ray::ObjectRef<ray::ObjectRef<int>> nested = ray::Put(ray::Put(41));
  EXPECT_EQ(41, *actor2.Task(&Counter::GetIntVal).Remote(nested).Get());
  std::vector<std::byte> bytes = *actor2.Task(&Counter::GetBytes).Remote(std::string("ab")).Get();
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[1], std::byte('b'));

  uint64_t pid = *actor2.Task(&Counter::GetPid).Remote().Get();
  EXPECT_TRUE(Counter::IsProcessAlive(pid));
  auto exited = actor2.Task(&Counter::Exit).Remote();
  EXPECT_THROW(exited.Get(), ray::internal::RayActorException);
  EXPECT_TRUE(Eventually([&] { return !Counter::IsProcessAlive(pid); }));
  ray::Shutdown();
}

TEST(RayCompatTest, ActorHandlesAsArgumentsAndResults) {
  ray::Init();
  auto actor1 = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).Remote();
  EXPECT_EQ(1, *actor1.Task(&Counter::Plus1).Remote().Get());
  auto actor2 = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).Remote();
  EXPECT_EQ(2, *actor2.Task(&Counter::Plus1ForActor).Remote(actor1).Get());
  auto child = actor1.Task(&Counter::CreateChildActor).Remote(std::string("child_actor_name")).Get();
  EXPECT_EQ(2, *child->Task(&Counter::Plus1).Remote().Get());
  ray::Shutdown();
}

TEST(RayCompatTest, DefaultActorLifetimeDetached) {
  ray::RayConfig config;
  config.default_actor_lifetime = ray::ActorLifetime::DETACHED;
  ray::Init(config, cmd_argc, cmd_argv);
  ray::ActorHandle<Counter> parent_actor = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).Remote();
  parent_actor.Task(&Counter::CreateChildActor).Remote(std::string("child_actor_name")).Get();
  auto child_actor_optional = ray::GetActor<Counter>("child_actor_name");
  ASSERT_TRUE(child_actor_optional);
  auto child_actor = *child_actor_optional;
  EXPECT_EQ(2, *child_actor.Task(&Counter::Plus1).Remote().Get());
  parent_actor.Kill();
  // The child is detached: its creator's death does not end it.
  EXPECT_EQ(3, *child_actor.Task(&Counter::Plus1).Remote().Get());
  ray::Shutdown();
}

TEST(RayCompatTest, MaxConcurrency) {
  ray::Init();
  auto actor1 = ray::Actor(ActorConcurrentCall::FactoryCreate).SetMaxConcurrency(3).Remote();
  auto object1 = actor1.Task(&ActorConcurrentCall::CountDown).Remote();
  auto object2 = actor1.Task(&ActorConcurrentCall::CountDown).Remote();
  auto object3 = actor1.Task(&ActorConcurrentCall::CountDown).Remote();
  EXPECT_EQ(*object1.Get(), "ok");
  EXPECT_EQ(*object2.Get(), "ok");
  EXPECT_EQ(*object3.Get(), "ok");
  ray::Shutdown();
}

TEST(RayCompatTest, ResourcesManagement) {
  ray::Init();
  auto actor1 = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetResources({{"CPU", 1.0}}).Remote();
  EXPECT_EQ(*actor1.Task(&Counter::Plus1).Remote().Get(), 1);
  auto actor2 = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetResources({{"CPU", 10000.0}}).Remote();
  std::vector<ray::ObjectRef<int>> objects{actor2.Task(&Counter::Plus1).Remote()};
  auto result = ray::Wait(objects, 1, 1000);
  EXPECT_EQ(result.ready.size(), 0u);
  EXPECT_EQ(result.unready.size(), 1u);
  ray::Shutdown();
}

TEST(RayCompatTest, Exceptions) {
  ray::Init();
  EXPECT_THROW(ray::Task(ThrowTask).Remote().Get(), ray::internal::RayTaskException);
  auto actor1 = ray::Actor(RAY_FUNC(Counter::FactoryCreate, int)).Remote(1);
  EXPECT_THROW(actor1.Task(&Counter::ExceptionFunc).Remote().Get(), ray::internal::RayTaskException);
  auto actor2 = ray::Actor(Counter::FactoryCreateException).Remote();
  EXPECT_THROW(actor2.Task(&Counter::Plus1).Remote().Get(), ray::internal::RayActorException);
  ray::Shutdown();
}

TEST(RayCompatTest, Namespaces) {
  ray::Init();
  ray::ActorHandle<Counter> actor =
      ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetName("isolated_actor", "isolated_ns").Remote();
  EXPECT_TRUE(*actor.Task(&Counter::Initialized).Remote().Get());
  EXPECT_FALSE(ray::GetActor<Counter>("isolated_actor"));
  EXPECT_TRUE(ray::GetActor<Counter>("isolated_actor", "isolated_ns"));
  EXPECT_FALSE(ray::GetActor<Counter>("isolated_actor", "other_ns"));
  auto actor1 = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetName("default_ns_actor").Remote();
  EXPECT_TRUE(*actor1.Task(&Counter::Initialized).Remote().Get());
  EXPECT_TRUE(ray::GetActor<Counter>("default_ns_actor"));
  EXPECT_FALSE(ray::GetActor<Counter>("default_ns_actor", "isolated_ns"));
  ray::Shutdown();

  ray::RayConfig config;
  config.ray_namespace = "test_get_current_namespace";
  ray::Init(config, cmd_argc, cmd_argv);
  EXPECT_EQ(ray::GetNamespace(), "test_get_current_namespace");
  EXPECT_EQ(*ray::Task(GetNamespaceInTask).Remote().Get(), "test_get_current_namespace");
  auto in_actor = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).Remote();
  EXPECT_EQ(*in_actor.Task(&Counter::GetNamespaceInActor).Remote().Get(), "test_get_current_namespace");
  ray::Shutdown();
}

ray::PlacementGroup CreateSimplePlacementGroup(const std::string& name) {
  std::vector<std::unordered_map<std::string, double>> bundles{{{"CPU", 1}}};
  ray::PlacementGroupCreationOptions options{name, bundles, ray::PlacementStrategy::PACK};
  return ray::CreatePlacementGroup(options);
}

TEST(RayCompatTest, CreateAndRemovePlacementGroup) {
  ray::Init();
  auto first = CreateSimplePlacementGroup("first_placement_group");
  EXPECT_TRUE(first.Wait(10));
  EXPECT_EQ(ray::GetAllPlacementGroups().size(), 1u);
  EXPECT_EQ(ray::GetPlacementGroupById(first.GetID()).GetID(), first.GetID());
  EXPECT_EQ(ray::GetPlacementGroup("first_placement_group").GetID(), first.GetID());
  auto r1 = ray::Task(Return1).SetPlacementGroup(first, 0).Remote();
  EXPECT_EQ(*r1.Get(), 1);
  ray::ActorHandle<Counter> actor =
      ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetPlacementGroup(first, 0).Remote();
  EXPECT_EQ(*actor.Task(&Counter::Plus1).Remote().Get(), 1);
  ray::RemovePlacementGroup(first.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(first.GetID()).GetState(), ray::PlacementGroupState::REMOVED);
  EXPECT_TRUE(ray::GetPlacementGroup("not_exist_placement_group").GetID().empty());
  ray::RemovePlacementGroup(first.GetID());
  ray::Shutdown();
}

TEST(RayCompatTest, CreatePlacementGroupExceedsClusterResource) {
  ray::Init();
  std::vector<std::unordered_map<std::string, double>> bundles{{{"CPU", 10000}}};
  ray::PlacementGroupCreationOptions options{"too_big", bundles, ray::PlacementStrategy::PACK};
  auto group = ray::CreatePlacementGroup(options);
  EXPECT_FALSE(group.Wait(2));
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(group.GetID()).GetState(), ray::PlacementGroupState::REMOVED);
  ray::Shutdown();
}

TEST(RayCompatTest, RuntimeEnvTaskLevelEnvVars) {
  ray::RayConfig config;
  ray::Init(config, cmd_argc, cmd_argv);
  EXPECT_EQ(*ray::Get(ray::Task(GetEnvVar).Remote("COMPAT_KEY")), "");
  ray::RuntimeEnv runtime_env;
  runtime_env.Set<std::map<std::string, std::string>>("env_vars", {{"COMPAT_KEY", "task_value"}});
  EXPECT_EQ(*ray::Get(ray::Task(GetEnvVar).SetRuntimeEnv(runtime_env).Remote("COMPAT_KEY")), "task_value");
  auto actor = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetRuntimeEnv(runtime_env).Remote();
  EXPECT_EQ(*ray::Get(actor.Task(&Counter::GetEnvVar).Remote("COMPAT_KEY")), "task_value");
  auto plain_actor = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).Remote();
  EXPECT_EQ(*ray::Get(plain_actor.Task(&Counter::GetEnvVar).Remote("COMPAT_KEY")), "");
  ray::Shutdown();
}

TEST(RayCompatTest, RuntimeEnvJobLevelEnvVars) {
  ray::RayConfig config;
  ray::RuntimeEnv runtime_env;
  runtime_env.Set<std::map<std::string, std::string>>("env_vars", {{"COMPAT_KEY", "job_value"}});
  config.runtime_env = runtime_env;
  ray::Init(config, cmd_argc, cmd_argv);
  EXPECT_EQ(*ray::Get(ray::Task(GetEnvVar).Remote("COMPAT_KEY")), "job_value");
  auto actor = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).Remote();
  EXPECT_EQ(*ray::Get(actor.Task(&Counter::GetEnvVar).Remote("COMPAT_KEY")), "job_value");
  ray::Shutdown();
}

TEST(RayCompatTest, RuntimeEnvApi) {
  ray::RuntimeEnv runtime_env;
  std::string working_dir = "/tmp/compat";
  runtime_env.Set("working_dir", working_dir);
  std::vector<std::string> modules = {"s3://bucket/a.zip"};
  runtime_env.Set("py_modules", modules);
  runtime_env.SetJsonStr("config", R"({"setup_timeout_seconds": 10})");
  std::string serialized = runtime_env.Serialize();
  ray::RuntimeEnv copy = ray::RuntimeEnv::Deserialize(serialized);
  EXPECT_EQ(copy.Get<std::string>("working_dir"), working_dir);
  EXPECT_EQ(copy.Get<std::vector<std::string>>("py_modules"), modules);
  EXPECT_EQ(copy.Get<ray::json>("config")["setup_timeout_seconds"], 10);
  EXPECT_TRUE(copy.Remove("config"));
  EXPECT_FALSE(copy.Contains("config"));
  EXPECT_FALSE(copy.Empty());
  EXPECT_THROW(copy.Get<int>("working_dir"), ray::internal::RayRuntimeEnvException);
  EXPECT_THROW(copy.SetJsonStr("config", "{"), ray::internal::RayRuntimeEnvException);
}

int main(int argc, char** argv) {
  cmd_argc = argc;
  cmd_argv = argv;
  ::testing::InitGoogleTest(&argc, argv);
  int ret = RUN_ALL_TESTS();
  ray::Shutdown();
  return ret;
}
