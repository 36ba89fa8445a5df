// ray::RayConfig: how ray::Init() connects this process to a cluster.
//
// A plain struct the caller fills before ray::Init(config); Init reads it once and
// keeps no reference to it. Every field has a default that works for a program run
// on one machine. Ray-compatible; fields marked "Manta" are additions.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ray/api/runtime_env.h"

namespace ray {

// Whether actors outlive the job (and their owner) that created them.
enum class ActorLifetime {
  NON_DETACHED,  // die with their owner, and when no handle is left (unless named)
  DETACHED,      // live until killed or the cluster stops; found by name
};

class RayConfig {
 public:
  // "ip:port" of the head node's GCS. Empty: use the environment variable
  // RAY_ADDRESS; empty too: start a private single-node cluster for this driver
  // and stop it at ray::Shutdown(). Overridden by the flag --ray_address=... when
  // Init gets argc/argv.
  std::string address = "";

  // Run everything inside this process: no daemons, tasks run on a small thread
  // pool, objects live in an in-process table. For tests and debugging.
  bool local_mode = false;

  // Ray-compatible alternative to the single-binary worker: directories or shared
  // libraries holding the RAY_REMOTE functions, loaded by the generic worker
  // executable. Empty (the default): workers re-execute this program's binary.
  std::vector<std::string> code_search_path;

  // Extra `manta start --head` arguments used when Init starts a private cluster
  // (see `address`), e.g. {"--object-store-memory=1000000000"}.
  std::vector<std::string> head_args;

  // The namespace named actors of this job live in. Empty: a fresh anonymous one.
  std::string ray_namespace = "";

  // The lifetime of every actor this job creates (its tasks' and actors' too).
  ActorLifetime default_actor_lifetime = ActorLifetime::NON_DETACHED;

  // Password of the cluster's Redis, when it has one. Assignable from a string.
  std::optional<std::string> redis_password_;

  // Resources of the private cluster's node when Init starts one (-1: detect the
  // machine's CPUs / GPUs). Ignored when connecting to an existing cluster.
  int num_cpus = -1;
  int num_gpus = -1;
  // Custom resources of that node: name -> quantity.
  std::unordered_map<std::string, double> resources;

  // Where this process (and a private cluster) writes its logs. Empty: the session
  // directory's `logs` folder.
  std::string logs_dir = "";

  // Print what this job's workers print (their stdout and stderr) on this driver's
  // stderr, each line prefixed with "(pid=<worker pid>, ip=<its node>)". A Manta
  // extension of Ray's C++ RayConfig (Ray's Python ray.init has it).
  bool log_to_driver = true;

  // The job's runtime environment (ray/api/runtime_env.h): every task and actor of
  // the job runs in it, merged under their own SetRuntimeEnv. Not applied to the
  // driver itself (except in local_mode, where the driver's process is the worker:
  // see README). Ray declares it boost::optional; `config.runtime_env = env;`
  // compiles with either.
  std::optional<RuntimeEnv> runtime_env;
};

}  // namespace ray
