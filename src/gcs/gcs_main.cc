// manta_gcs: the cluster's metadata service. Started by `manta start --head`.
#include "src/gcs/gcs_main.h"

#include <glog/logging.h>

#include <iostream>

#include "src/common/config.h"
#include "src/common/daemon.h"
#include "src/common/enrollment.h"
#include "src/common/flags.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/gcs/gcs_server.h"
#include "src/gcs/in_memory_store_client.h"
#include "src/gcs/redis_store_client.h"

namespace {

struct GcsFlags {
  std::string bind_address = "127.0.0.1";
  int metrics_export_port = 0;
  int port = 0;
  std::string redis_address;
  std::string redis_password_file;
  std::string cluster_name = "default";
  std::string ready_file;
  bool in_memory = false;
  std::string tls_ca_key;
  manta::DaemonFlags daemon;
};

void AddGcsFlags(manta::FlagParser& parser, GcsFlags* f) {
  parser.Add("--bind-address", &f->bind_address, "address to listen on");
  parser.Add("--metrics-export-port", &f->metrics_export_port,
             "port of the Prometheus endpoint, GET /metrics (0 = any free port)")
      .Range(0, 65535);
  parser.Add("--port", &f->port, "port to listen on (0 = any free port)").Range(0, 65535);
  parser.Add("--redis-address", &f->redis_address, "Redis host:port holding the tables");
  parser.Add("--redis-password-file", &f->redis_password_file, "file holding the Redis password (mode 0600)");
  parser.Add("--cluster-name", &f->cluster_name, "names the Redis keys: manta:<name>:<table>");
  parser.Add("--ready-file", &f->ready_file, "written with the bound port and the metrics port once serving");
  parser.AddFlag("--in-memory-store", &f->in_memory, "keep tables in memory only (no Redis; for testing)");
  parser.Add("--tls-ca-key", &f->tls_ca_key,
             "the key of the CA in --tls-ca (mode 0600): members that prove the token get certificates");
  manta::AddDaemonFlags(parser, &f->daemon);
}

// Where the tables live in Redis, from the flags; an error names the bad flag.
absl::StatusOr<manta::gcs::RedisStoreClient::Options> RedisOptions(const std::string& redis_address,
                                                                   const std::string& redis_password_file,
                                                                   const std::string& cluster_name,
                                                                   const manta::Config& config) {
  if (redis_address.empty()) return absl::InvalidArgumentError("--redis-address is required (or --in-memory-store)");
  auto hp = manta::ParseHostPort(redis_address);
  if (!hp.ok()) return absl::InvalidArgumentError("--redis-address: " + std::string(hp.status().message()));
  manta::gcs::RedisStoreClient::Options options;
  options.host = hp->host;
  options.port = hp->port;
  if (!redis_password_file.empty()) {
    auto password = manta::ReadSecretFile(redis_password_file);
    if (!password.ok()) {
      return absl::InvalidArgumentError("--redis-password-file: " + std::string(password.status().message()));
    }
    options.password = *password;
  }
  options.key_prefix = "manta:" + cluster_name + ":";
  options.connect_timeout_ms = config.redis_connect_timeout_ms;
  options.command_timeout_ms = config.redis_command_timeout_ms;
  options.retry_attempts = config.redis_retry_attempts;
  return options;
}

// The tables' store in Redis. InvalidArgument names a bad flag; other errors are
// Redis's.
absl::StatusOr<std::unique_ptr<manta::gcs::StoreClientInterface>> ConnectRedis(
    manta::EventLoop& loop, const std::string& redis_address, const std::string& redis_password_file,
    const std::string& cluster_name, const manta::Config& config) {
  auto options = RedisOptions(redis_address, redis_password_file, cluster_name, config);
  if (!options.ok()) return options.status();
  auto redis = manta::gcs::RedisStoreClient::Connect(loop, *options);
  if (!redis.ok()) {
    // Not a flag's fault, whatever Redis answered.
    if (absl::IsInvalidArgument(redis.status())) return absl::UnavailableError(redis.status().message());
    return redis.status();
  }
  return std::unique_ptr<manta::gcs::StoreClientInterface>(std::move(*redis));
}

// The CA that --tls-ca and --tls-ca-key name, enrolling members that prove the
// token; null without --tls-ca-key.
absl::StatusOr<std::unique_ptr<manta::EnrollmentServer>> MakeEnrollmentServer(const GcsFlags& f,
                                                                              const manta::rpc::Credentials& credentials,
                                                                              const manta::Config& config) {
  if (f.tls_ca_key.empty()) return nullptr;
  if (!credentials.tls()) return absl::InvalidArgumentError("--tls-ca-key needs --tls-cert, --tls-key and --tls-ca");
  auto key = manta::ReadSecretFile(f.tls_ca_key);
  if (!key.ok()) return absl::InvalidArgumentError("--tls-ca-key: " + std::string(key.status().message()));
  auto ca = manta::ClusterCa::Load(credentials.tls_ca, *key);
  if (!ca.ok()) return absl::InvalidArgumentError("--tls-ca-key: " + std::string(ca.status().message()));
  manta::EnrollmentServer::Options options;
  options.certificate_lifetime_s = config.tls_certificate_lifetime_s;
  options.timeout_ms = config.enrollment_timeout_ms;
  return std::make_unique<manta::EnrollmentServer>(std::move(*ca), credentials.token, options);
}

// The server's options from the flags and the daemon's setup; an error names a bad
// task channel protection.
absl::StatusOr<manta::gcs::GcsServerOptions> ServerOptions(const GcsFlags& f, const manta::DaemonSetup& daemon) {
  manta::gcs::GcsServerOptions options;
  options.bind_address = f.bind_address;
  options.port = f.port;
  options.metrics_export_port = f.metrics_export_port;
  options.config = daemon.config;
  options.system_config = f.daemon.system_config;
  options.faults = daemon.faults;
  auto protection =
      manta::core::ParseChannelProtection(daemon.config.task_channel_protection, daemon.credentials.tls());
  if (!protection.ok()) return protection.status();
  options.task_channel_security = {daemon.credentials.token, *protection};
  return options;
}

}  // namespace

int manta::gcs::GcsMain(int argc, char** argv) {
  manta::FlagParser parser("manta_gcs: Manta's global control store");
  GcsFlags gcs_flags;
  AddGcsFlags(parser, &gcs_flags);
  manta::DaemonFlags& flags = gcs_flags.daemon;
  if (auto exit_code = parser.Parse(argc, argv)) return *exit_code;
  const std::string& bind_address = gcs_flags.bind_address;
  const std::string& ready_file = gcs_flags.ready_file;

  auto daemon = manta::SetUpDaemon(argv[0], flags);
  if (!daemon.ok()) {
    std::cerr << "manta_gcs: " << daemon.status().message() << std::endl;
    return 2;
  }
  const manta::Config* config = &daemon->config;
  const manta::rpc::Credentials* credentials = &daemon->credentials;

  manta::EventLoop loop(config->slow_handler_warn_ms);
  std::unique_ptr<manta::gcs::StoreClientInterface> store;
  if (gcs_flags.in_memory) {
    store = std::make_unique<manta::gcs::InMemoryStoreClient>(loop);
  } else {
    auto redis = ConnectRedis(loop, gcs_flags.redis_address, gcs_flags.redis_password_file, gcs_flags.cluster_name,
                              *config);
    if (!redis.ok()) {
      std::cerr << "manta_gcs: " << redis.status().message() << std::endl;
      return absl::IsInvalidArgument(redis.status()) ? 2 : 1;
    }
    store = std::move(*redis);
  }

  auto server_options = ServerOptions(gcs_flags, *daemon);
  if (!server_options.ok()) {
    std::cerr << "manta_gcs: " << server_options.status().message() << std::endl;
    return 1;
  }
  manta::gcs::GcsServerOptions& options = *server_options;
  auto enrollment = MakeEnrollmentServer(gcs_flags, *credentials, *config);
  if (!enrollment.ok()) {
    std::cerr << "manta_gcs: " << enrollment.status().message() << std::endl;
    return 2;
  }
  if (*enrollment) options.plain_connection_handler = [enroll = enrollment->get()](int fd) { enroll->Serve(fd); };
  manta::gcs::GcsServer server(loop, options, std::move(store));
  int exit_code = 0;
  server.Start([&](absl::Status s) {
    if (!s.ok()) {
      std::cerr << "manta_gcs: " << s.message() << std::endl;
      LOG(ERROR) << "start failed: " << s;
      exit_code = 1;
      loop.Stop();
      return;
    }
    if (!ready_file.empty()) {
      auto w = manta::WriteFileAtomic(
          ready_file, std::to_string(server.port()) + " " + std::to_string(server.metrics_port()) + "\n", 0600);
      if (!w.ok()) {
        std::cerr << "manta_gcs: " << w.message() << std::endl;
        exit_code = 1;
        server.StopAsync([&] { loop.Stop(); });
        return;
      }
    }
    LOG(INFO) << "manta_gcs ready on " << bind_address << ":" << server.port() << ", cluster "
              << server.cluster_id().Hex();
  });
  loop.OnTerminationSignal([&](int signo) {
    LOG(INFO) << "manta_gcs: signal " << signo << ", shutting down";
    server.StopAsync([&] { loop.Stop(); });
  });
  loop.Run();
  if (!server.WaitForStop(3000)) {
    LOG(ERROR) << "RPC server did not stop in time; exiting anyway";
    std::_Exit(exit_code);
  }
  return exit_code;
}
