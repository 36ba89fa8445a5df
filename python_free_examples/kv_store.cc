// A key-value store actor, named and detached, found from a second driver.
//
// An actor is a stateful worker: ray::Actor(KvStore::Create).Remote() starts one,
// and every call through its handle runs on that one instance, in order. Run it
// twice against one cluster:
//
//   manta start --head --port 0                  # prints the GCS address
//   kv_store --ray_address=<address> write       # first driver
//   kv_store --ray_address=<address> read        # second driver
//   manta stop
//
// The first driver creates a *detached* actor named "store" in the namespace
// "kv_example" (it outlives the driver that made it) and fills it; it also shows a
// counter actor's calls keeping their order and a handle passed to a task. The
// second driver, a new job, finds the store by name, reads it back, adds to it and
// kills it.
#include <ray/api.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

class KvStore {
 public:
  static KvStore* Create() { return new KvStore(); }
  void Put(std::string key, std::string value) { data_[key] = value; }
  std::string Get(std::string key) {
    auto it = data_.find(key);
    return it == data_.end() ? "<none>" : it->second;
  }
  int Size() { return static_cast<int>(data_.size()); }

 private:
  std::map<std::string, std::string> data_;
};

class Counter {
 public:
  static Counter* Create(int start) { return new Counter(start); }
  explicit Counter(int start) : value_(start) {}
  int Add(int x) { return value_ += x; }

 private:
  int value_;
};

// A task that receives an actor handle and calls the actor.
int AddTwice(ray::ActorHandle<Counter> counter, int x) {
  counter.Task(&Counter::Add).Remote(x);
  return *counter.Task(&Counter::Add).Remote(x).Get();
}

RAY_REMOTE(KvStore::Create, &KvStore::Put, &KvStore::Get, &KvStore::Size, Counter::Create, &Counter::Add, AddTwice);

// The second driver: finds the detached store by name and reads it.
int ReadBack() {
  boost::optional<ray::ActorHandle<KvStore>> store = ray::GetActor<KvStore>("store");
  if (!store) {
    std::cerr << "second driver: no actor named 'store' in namespace " << ray::GetNamespace() << std::endl;
    return 1;
  }
  std::cout << "second driver read: apple=" << *store->Task(&KvStore::Get).Remote(std::string("apple")).Get()
            << ", banana=" << *store->Task(&KvStore::Get).Remote(std::string("banana")).Get() << std::endl;
  store->Task(&KvStore::Put).Remote(std::string("cherry"), std::string("dark red")).Get();
  std::cout << "second driver: the store now holds " << *store->Task(&KvStore::Size).Remote().Get() << " keys"
            << std::endl;
  store->Kill();
  std::cout << "second driver: store killed; found again: " << (ray::GetActor<KvStore>("store") ? "yes" : "no")
            << std::endl;
  return 0;
}

int Write() {
  ray::ActorHandle<KvStore> store = ray::Actor(KvStore::Create).SetName("store").Remote();
  store.Task(&KvStore::Put).Remote(std::string("apple"), std::string("red"));
  store.Task(&KvStore::Put).Remote(std::string("banana"), std::string("yellow"));
  std::cout << "first driver: the store holds " << *store.Task(&KvStore::Size).Remote().Get() << " keys"
            << std::endl;

  // Calls from one caller run in order; a handle can be passed to tasks.
  ray::ActorHandle<Counter> counter = ray::Actor(Counter::Create).Remote(0);
  std::vector<ray::ObjectRef<int>> sums;
  for (int i = 1; i <= 4; ++i) sums.push_back(counter.Task(&Counter::Add).Remote(i));
  std::cout << "counter after 1+2+3+4: " << *sums.back().Get() << std::endl;
  std::cout << "counter after a task added 5 twice: " << *ray::Task(AddTwice).Remote(counter, 5).Get() << std::endl;
  counter.Kill();
  return 0;
}

int main(int argc, char** argv) {
  ray::RayConfig config;
  config.ray_namespace = "kv_example";
  config.default_actor_lifetime = ray::ActorLifetime::DETACHED;  // this job's actors outlive it
  ray::Init(config, argc, argv);  // --ray_address=... joins that cluster
  std::string mode = argc > 1 ? argv[argc - 1] : "";
  int rc = mode == "write" ? Write() : mode == "read" ? ReadBack() : 2;
  if (rc == 2) std::cerr << "usage: kv_store --ray_address=<GCS address> write|read" << std::endl;
  ray::Shutdown();
  return rc;
}
