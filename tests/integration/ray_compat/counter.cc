#include "counter.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

Counter::Counter(int init, bool with_exception) {
  if (with_exception) throw std::invalid_argument("creation error");
  count = init;
  is_restarted = ray::WasCurrentActorRestarted();
}

Counter* Counter::FactoryCreate() { return new Counter(0); }
Counter* Counter::FactoryCreateException() { return new Counter(0, true); }
Counter* Counter::FactoryCreate(int init) { return new Counter(init); }
Counter* Counter::FactoryCreate(int init1, int init2) { return new Counter(init1 + init2); }

int Counter::Plus1() { return count += 1; }
int Counter::Add(int x) { return count += x; }
int Counter::Exit() {
  ray::ExitActor();
  return 1;
}
uint64_t Counter::GetPid() { return getpid(); }
bool Counter::IsProcessAlive(uint64_t pid) { return !(kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH); }
bool Counter::CheckRestartInActorCreationTask() { return is_restarted; }
bool Counter::CheckRestartInActorTask() { return ray::WasCurrentActorRestarted(); }

ray::ActorHandle<Counter> Counter::CreateChildActor(std::string actor_name) {
  child_actor = ray::Actor(RAY_FUNC(Counter::FactoryCreate)).SetName(actor_name).Remote();
  child_actor.Task(&Counter::Plus1).Remote().Get();
  return child_actor;
}

int Counter::Plus1ForActor(ray::ActorHandle<Counter> actor) { return *actor.Task(&Counter::Plus1).Remote().Get(); }

std::string Counter::GetNamespaceInActor() { return ray::GetNamespace(); }

RAY_REMOTE(RAY_FUNC(Counter::FactoryCreate), Counter::FactoryCreateException, RAY_FUNC(Counter::FactoryCreate, int),
           RAY_FUNC(Counter::FactoryCreate, int, int), &Counter::Plus1, &Counter::Add, &Counter::Exit,
           &Counter::GetPid, &Counter::ExceptionFunc, &Counter::CheckRestartInActorCreationTask,
           &Counter::CheckRestartInActorTask, &Counter::CreateChildActor, &Counter::Plus1ForActor,
           &Counter::GetNamespaceInActor, &Counter::GetVal, &Counter::GetBytes, &Counter::GetIntVal,
           &Counter::Initialized, &Counter::GetCount, &Counter::GetEnvVar);

RAY_REMOTE(ActorConcurrentCall::FactoryCreate, &ActorConcurrentCall::CountDown);
