// manta_gcs: the cluster's metadata service. Started by `manta start --head`.
#include <glog/logging.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "src/common/config.h"
#include "src/common/logging.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/gcs/gcs_server.h"
#include "src/gcs/in_memory_store_client.h"
#include "src/gcs/redis_store_client.h"

int main(int argc, char** argv) {
  CLI::App app{"manta_gcs: Manta's global control store"};
  std::string bind_address = "127.0.0.1";
  int port = 0;
  std::string redis_address;
  std::string redis_password_file;
  std::string cluster_name = "default";
  std::string ready_file;
  std::string log_dir;
  std::string system_config;
  bool in_memory = false;
  std::string token_file;
  manta::rpc::TlsFiles tls;
  app.add_option("--bind-address", bind_address, "address to listen on");
  app.add_option("--port", port, "port to listen on (0 = any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--redis-address", redis_address, "Redis host:port holding the tables");
  app.add_option("--redis-password-file", redis_password_file, "file holding the Redis password (mode 0600)");
  app.add_option("--cluster-name", cluster_name, "names the Redis keys: manta:<name>:<table>");
  app.add_option("--ready-file", ready_file, "written with the bound port once serving");
  app.add_option("--log-dir", log_dir, "log directory (default: stderr)");
  app.add_option("--system-config", system_config, "JSON object of config overrides");
  app.add_flag("--in-memory-store", in_memory, "keep tables in memory only (no Redis; for testing)");
  app.add_option("--token-file", token_file, "file holding the cluster token (default: $MANTA_CLUSTER_TOKEN)");
  app.add_option("--tls-cert", tls.cert_file, "TLS certificate chain (PEM); turns TLS on with --tls-key, --tls-ca");
  app.add_option("--tls-key", tls.key_file, "TLS private key (PEM)");
  app.add_option("--tls-ca", tls.ca_file, "CA certificate every member's certificate is signed by (PEM)");
  CLI11_PARSE(app, argc, argv);

  manta::InitLogging(argv[0], log_dir);
  manta::RaiseOpenFileLimit();
  auto credentials = manta::rpc::InstallDaemonCredentials(token_file, tls);
  if (!credentials.ok()) {
    std::cerr << "manta_gcs: " << credentials.status().message() << std::endl;
    return 2;
  }
  auto config = manta::Config::Load(system_config);
  if (!config.ok()) {
    std::cerr << "manta_gcs: " << config.status().message() << std::endl;
    return 2;
  }
  auto faults = manta::rpc::FaultInjector::Parse(config->testing_rpc_failure);
  if (!faults.ok()) {
    std::cerr << "manta_gcs: " << faults.status().message() << std::endl;
    return 2;
  }

  manta::EventLoop loop(config->slow_handler_warn_ms);
  std::unique_ptr<manta::gcs::StoreClientInterface> store;
  if (in_memory) {
    store = std::make_unique<manta::gcs::InMemoryStoreClient>(loop);
  } else {
    if (redis_address.empty()) {
      std::cerr << "manta_gcs: --redis-address is required (or --in-memory-store)" << std::endl;
      return 2;
    }
    auto hp = manta::ParseHostPort(redis_address);
    if (!hp.ok()) {
      std::cerr << "manta_gcs: --redis-address: " << hp.status().message() << std::endl;
      return 2;
    }
    manta::gcs::RedisStoreClient::Options redis_options;
    redis_options.host = hp->host;
    redis_options.port = hp->port;
    if (!redis_password_file.empty()) {
      auto password = manta::ReadSecretFile(redis_password_file);
      if (!password.ok()) {
        std::cerr << "manta_gcs: --redis-password-file: " << password.status().message() << std::endl;
        return 2;
      }
      redis_options.password = *password;
    }
    redis_options.key_prefix = "manta:" + cluster_name + ":";
    redis_options.connect_timeout_ms = config->redis_connect_timeout_ms;
    redis_options.command_timeout_ms = config->redis_command_timeout_ms;
    redis_options.retry_attempts = config->redis_retry_attempts;
    auto redis = manta::gcs::RedisStoreClient::Connect(loop, redis_options);
    if (!redis.ok()) {
      std::cerr << "manta_gcs: " << redis.status().message() << std::endl;
      return 1;
    }
    store = std::move(*redis);
  }

  manta::gcs::GcsServerOptions options;
  options.bind_address = bind_address;
  options.port = port;
  options.config = *config;
  options.system_config = system_config;
  options.faults = std::make_shared<manta::rpc::FaultInjector>(*faults);
  auto protection = manta::core::ParseChannelProtection(config->task_channel_protection, credentials->tls());
  if (!protection.ok()) {
    std::cerr << "manta_gcs: " << protection.status().message() << std::endl;
    return 1;
  }
  options.task_channel_security = {credentials->token, *protection};
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
      auto w = manta::WriteFileAtomic(ready_file, std::to_string(server.port()) + "\n", 0600);
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
