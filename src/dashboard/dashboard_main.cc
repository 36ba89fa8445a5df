// manta_dashboard: the web dashboard of a cluster (dashboard_server.h), started by
// `manta start --head` (--dashboard-port; 0 = none).
#include "src/dashboard/dashboard_main.h"

#include <glog/logging.h>

#include <iostream>

#include "src/common/daemon.h"
#include "src/common/event_loop.h"
#include "src/common/flags.h"
#include "src/common/metrics/metrics_endpoint.h"
#include "src/common/util.h"
#include "src/dashboard/dashboard_server.h"

int manta::dashboard::DashboardMain(int argc, char** argv) {
  manta::FlagParser parser("manta_dashboard: the web dashboard of a Manta cluster");
  manta::dashboard::DashboardOptions options;
  std::string ready_file;
  manta::DaemonFlags flags;
  parser.Add("--gcs-address", &options.gcs_address, "GCS host:port").Required();
  parser.Add("--host", &options.host, "address to serve on (default 127.0.0.1)");
  parser.Add("--port", &options.port, "port to serve on (default 8265; taken: any free port)")
      .Range(1, 65535);
  parser.Add("--ready-file", &ready_file, "written with the bound port once serving");
  manta::AddDaemonFlags(parser, &flags);
  if (auto exit_code = parser.Parse(argc, argv)) return *exit_code;
  auto daemon = manta::SetUpDaemon(argv[0], flags);
  if (!daemon.ok()) {
    std::cerr << "manta_dashboard: " << daemon.status().message() << std::endl;
    return 2;
  }
  options.token = daemon->credentials.token;
  options.log_dir = flags.log_dir;  // the Jobs API's entrypoint logs
  options.package_limits.max_bytes = daemon->config.job_working_dir_max_bytes;
  options.package_limits.max_files = daemon->config.job_working_dir_max_files;
  if (!flags.tls.cert_file.empty()) {
    options.supervisor_flags = {"--tls-cert", flags.tls.cert_file, "--tls-key", flags.tls.key_file, "--tls-ca",
                                flags.tls.ca_file};
  }
  options.tls = manta::metrics::HttpTlsOf(daemon->credentials);
  auto server = std::make_unique<manta::dashboard::DashboardServer>(options);
  absl::Status started = server->Start();
  if (!started.ok()) {
    // The usual port is taken (another cluster's dashboard): any free one will do.
    LOG(WARNING) << started.message() << "; serving on a free port instead";
    options.port = 0;
    server = std::make_unique<manta::dashboard::DashboardServer>(options);
    started = server->Start();
  }
  if (!started.ok()) {
    std::cerr << "manta_dashboard: " << started.message() << std::endl;
    return 1;
  }
  if (!ready_file.empty()) {
    if (auto w = manta::WriteFileAtomic(ready_file, std::to_string(server->port()) + "\n", 0600); !w.ok()) {
      std::cerr << "manta_dashboard: " << w.message() << std::endl;
      return 1;
    }
  }
  LOG(INFO) << "manta_dashboard serving " << (options.tls.enabled() ? "https://" : "http://") << options.host << ":" << server->port() << "/";
  manta::EventLoop loop;
  loop.OnTerminationSignal([&](int) { loop.Stop(); });
  loop.Run();
  server->Stop();
  return 0;
}
