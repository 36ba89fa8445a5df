// Hello, tasks: the smallest Manta program.
//
// ray::Init() with no address starts a private local cluster (Redis, GCS, one
// raylet) and ray::Shutdown() stops it. The raylet runs the tasks in worker
// processes started from this same binary: when a worker runs main(), ray::Init()
// serves tasks and never returns, so the code after it only runs in the driver.
#include <ray/api.h>

#include <iostream>
#include <string>

std::string Greet(std::string name) { return "Hello, " + name + "!"; }
int Add(int a, int b) { return a + b; }
RAY_REMOTE(Greet, Add);

int main(int argc, char** argv) {
  ray::RayConfig config;
  ray::Init(config, argc, argv);

  ray::ObjectRef<std::string> greeting = ray::Task(Greet).Remote("Manta");
  std::cout << *greeting.Get() << std::endl;

  // An ObjectRef can be passed straight to another task: the value travels
  // between workers, never through the driver.
  ray::ObjectRef<int> three = ray::Task(Add).Remote(1, 2);
  ray::ObjectRef<int> ten = ray::Task(Add).Remote(three, 7);
  std::cout << "1 + 2 + 7 = " << *ray::Get(ten) << std::endl;

  ray::Shutdown();
  return 0;
}
