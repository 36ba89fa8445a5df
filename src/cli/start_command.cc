// `manta start`: starts Redis (head, unless external), the GCS (head) and a raylet,
// waits until each answers, and records them in a new session directory.
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>
#include <iostream>
#include <thread>

#include "src/cli/commands.h"
#include "src/cli/session.h"
#include "src/autoscaler/autoscaler_config.h"
#include "src/common/config.h"
#include "src/common/network.h"
#include "src/common/process.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/cluster_tls.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/gcs/redis_store_client.h"
#include "src/jobs/job_record.h"
#include "src/scheduling/resources.h"
#include "protos/gcs.grpc.pb.h"

namespace manta::cli {

std::string MetricsUrl(const std::string& host, int port) {
  const bool https = rpc::ProcessCredentials().tls() && !IsLoopbackAddress(host);
  return (https ? "https://" : "http://") + host + ":" + std::to_string(port) + "/metrics";
}

namespace {

constexpr int64_t kReadyTimeoutMs = 20000;

struct Started {
  pid_t pid;
  Role role;
};

// Waits for a daemon to be ready: wakes when a file appears in the ready file's
// folder (inotify) or the daemon exits (pidfd), or after the time given, whichever
// is first. With no ready file (or no inotify), it waits for the exit or the time.
class ReadyWatch {
 public:
  ReadyWatch(const std::string& ready_file, pid_t pid) {
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (ready_file.empty()) return;
    inotify_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    const std::string dir = std::filesystem::path(ready_file).parent_path().string();
    if (inotify_ >= 0 && inotify_add_watch(inotify_, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE) < 0) {
      close(inotify_);
      inotify_ = -1;
    }
  }
  ~ReadyWatch() {
    if (inotify_ >= 0) close(inotify_);
    if (pidfd_ >= 0) close(pidfd_);
  }
  ReadyWatch(const ReadyWatch&) = delete;
  ReadyWatch& operator=(const ReadyWatch&) = delete;

  void Wait(int64_t timeout_ms) {
    pollfd fds[2] = {{inotify_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(timeout_ms)) > 0 && (fds[0].revents & POLLIN)) {
      char events[4096];
      while (read(inotify_, events, sizeof(events)) > 0) {
      }
    }
  }

 private:
  int inotify_ = -1;
  int pidfd_ = -1;
};

// Tracks what this invocation started so a failure leaves nothing behind.
class Launcher {
 public:
  explicit Launcher(const Session& session) : session_(session) {}

  // Starts `exe` with `args`, records it, and waits for `ready_file` (or, when empty,
  // for `ready_check`). Returns the content of the ready file.
  absl::StatusOr<std::string> Start(const std::string& exe_name, std::vector<std::string> args, Role role,
                                    const std::string& ready_file, std::function<bool()> ready_check = nullptr) {
    auto pid = Launch(exe_name, std::move(args), role);
    if (!pid.ok()) return pid.status();
    return AwaitReady(*pid, exe_name, role, ready_file, std::move(ready_check));
  }

  // Starts `exe` with `args` and records it; its pid.
  absl::StatusOr<pid_t> Launch(const std::string& exe_name, std::vector<std::string> args, Role role) {
    std::string exe = FindExecutable(exe_name);
    if (exe.empty()) {
      return absl::NotFoundError("cannot find " + exe_name + " (next to manta or in PATH)" +
                                 (exe_name == "redis-server" ? "; install it with scripts/install-deps" : ""));
    }
    ProcessOptions p;
    p.argv.push_back(exe);
    for (auto& a : args) p.argv.push_back(std::move(a));
    p.output_file = OutputFile(role);
    p.new_session = true;
    auto pid = StartProcess(p);
    if (!pid.ok()) return pid.status();
    started_.push_back({*pid, role});
    if (auto s = session_.Record(*pid, role, exe_name); !s.ok()) return s;
    return *pid;
  }

  // Waits until `pid` (started by Launch) writes `ready_file` (or, when empty, until
  // `ready_check`); the content of the ready file, or why it did not become ready.
  absl::StatusOr<std::string> AwaitReady(pid_t pid, const std::string& exe_name, Role role,
                                         const std::string& ready_file, std::function<bool()> ready_check) {
    const std::string out = OutputFile(role);
    int64_t deadline = MonotonicMs() + kReadyTimeoutMs;
    // A ready file is written in place by a rename: watched, it is seen at once.
    ReadyWatch watch(ready_file, pid);
    int64_t sleep_us = 500;
    while (MonotonicMs() < deadline) {
      if (!ready_file.empty()) {
        auto content = ReadFile(ready_file);
        if (content.ok() && !content->empty()) return *content;
      } else if (ready_check && ready_check()) {
        return std::string();
      }
      if (ReapIfExited(pid)) return absl::UnavailableError(ExplainExit(exe_name, out));
      watch.Wait(sleep_us / 1000 + 1);
      sleep_us = std::min<int64_t>(sleep_us * 2, ready_file.empty() ? 4000 : 20000);
    }
    return absl::DeadlineExceededError(exe_name + " did not become ready within " +
                                       std::to_string(kReadyTimeoutMs / 1000) + " s; see " + out);
  }

  // Kills everything started so far (after a failure) and forgets it.
  void Abort() {
    for (auto it = started_.rbegin(); it != started_.rend(); ++it) {
      (void)SignalProcess(it->pid, SIGKILL);
      WaitForExit(it->pid, 5000);
    }
    std::error_code ec;
    std::filesystem::remove_all(session_.dir() + "/pids", ec);
    started_.clear();
  }

  const std::vector<Started>& started() const { return started_; }

 private:
  std::string OutputFile(Role role) const { return session_.LogDir() + "/" + RoleName(role) + ".out"; }

  // The daemon's own last error line, or the tail of its output.
  static std::string ExplainExit(const std::string& exe_name, const std::string& out_file) {
    std::ifstream in(out_file);
    std::string line, last_error, last;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      last = line;
      if (line.rfind(exe_name + ":", 0) == 0 || line.find("# ") != std::string::npos) last_error = line;
    }
    std::string why = !last_error.empty() ? last_error : last;
    return exe_name + " exited during start-up" + (why.empty() ? "" : ": " + why);
  }

  const Session& session_;
  std::vector<Started> started_;
};

int Error(const std::string& message) {
  std::cerr << "manta start: " << message << std::endl;
  return 1;
}

absl::Status CheckGcsReachable(const std::string& address) {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(address, 4 << 20));
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  rpc::GetClusterIdReply reply;
  grpc::Status s = stub->GetClusterId(&ctx, rpc::GetClusterIdRequest(), &reply);
  if (!s.ok()) {
    return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                  (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  return absl::OkStatus();
}

bool IsWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "[::]"; }

// Where the daemons listen and what they advertise. Loopback unless --bind-address
// says otherwise; the advertised address must be one the daemons listen on.
absl::Status ResolveAddresses(StartOptions* o) {
  if (o->bind_address.empty()) {
    // A loopback --node-ip-address (127.0.0.2, to run several nodes on one machine)
    // is also where to listen; any other needs --bind-address, so that a cluster is
    // reachable from other machines only when asked.
    if (!o->node_ip_address.empty() && !IsLoopbackAddress(o->node_ip_address)) {
      return absl::InvalidArgumentError("--node-ip-address " + o->node_ip_address +
                                        " is not a loopback address, but the daemons listen on loopback unless "
                                        "told otherwise: add --bind-address " + o->node_ip_address +
                                        " (or --bind-address 0.0.0.0 for every interface)");
    }
    o->bind_address = o->node_ip_address.empty() ? "127.0.0.1" : o->node_ip_address;
  }
  if (o->bind_address == "localhost") o->bind_address = "127.0.0.1";
  if (o->node_ip_address.empty()) {
    if (!IsWildcard(o->bind_address)) {
      o->node_ip_address = o->bind_address;
    } else {
      o->node_ip_address = FirstExternalIpv4();
      if (o->node_ip_address.empty()) o->node_ip_address = "127.0.0.1";
    }
  }
  if (IsWildcard(o->node_ip_address)) {
    return absl::InvalidArgumentError("--node-ip-address " + o->node_ip_address +
                                      " is not an address other processes can reach; give this machine's address");
  }
  if (!IsWildcard(o->bind_address) && o->bind_address != o->node_ip_address &&
      !(IsLoopbackAddress(o->bind_address) && o->node_ip_address == "localhost")) {
    return absl::InvalidArgumentError("--node-ip-address " + o->node_ip_address +
                                      " is advertised, but the daemons would listen on " + o->bind_address +
                                      " only: give the same address to both, or --bind-address 0.0.0.0");
  }
  return absl::OkStatus();
}

// What every daemon is started with: the session's token file and the TLS files.
std::vector<std::string> SecurityArgs(const StartOptions& o, const Session& session) {
  std::vector<std::string> args = {"--token-file", session.TokenFile()};
  if (o.tls.enabled()) {
    args.insert(args.end(), {"--tls-cert", o.tls.cert_file, "--tls-key", o.tls.key_file, "--tls-ca", o.tls.ca_file});
  }
  return args;
}

std::vector<std::string> RayletArgs(const StartOptions& o, const Session& session, const std::string& gcs_address) {
  std::vector<std::string> args = {"--gcs-address", gcs_address, "--node-ip-address", o.node_ip_address,
                                   "--bind-address", o.bind_address, "--session-dir", session.dir(), "--log-dir", session.LogDir(),
                                   "--ready-file", session.Path("raylet.ready")};
  for (std::string& arg : SecurityArgs(o, session)) args.push_back(std::move(arg));
  if (o.head) args.push_back("--head");
  args.insert(args.end(), {"--metrics-export-port", std::to_string(o.metrics_export_port)});
  if (o.num_cpus >= 0) args.insert(args.end(), {"--num-cpus", std::to_string(o.num_cpus)});
  if (o.num_gpus >= 0) args.insert(args.end(), {"--num-gpus", std::to_string(o.num_gpus)});
  if (o.memory >= 0) args.insert(args.end(), {"--memory", std::to_string(o.memory)});
  if (o.object_store_memory >= 0) {
    args.insert(args.end(), {"--object-store-memory", std::to_string(o.object_store_memory)});
  }
  if (!o.resources.empty()) args.insert(args.end(), {"--resources", o.resources});
  if (!o.node_name.empty()) args.insert(args.end(), {"--node-name", o.node_name});
  if (!o.node_type.empty()) args.insert(args.end(), {"--node-type", o.node_type});
  if (!o.instance_id.empty()) args.insert(args.end(), {"--instance-id", o.instance_id});
  if (!o.system_config.empty()) args.insert(args.end(), {"--system-config", o.system_config});
  return args;
}

std::vector<std::string> DashboardArgs(const StartOptions& o, const Session& session, const std::string& gcs_address) {
  std::vector<std::string> args = {"--gcs-address", gcs_address, "--host", o.dashboard_host,
                                   "--port", std::to_string(o.dashboard_port), "--log-dir", session.LogDir(),
                                   "--ready-file", session.Path("dashboard.ready")};
  for (std::string& arg : SecurityArgs(o, session)) args.push_back(std::move(arg));
  return args;
}

// The dashboard's URL once its ready file gave `port` ("" and a message if it did not).
std::string DashboardUrl(const StartOptions& o, const absl::StatusOr<std::string>& port) {
  if (!port.ok()) {
    std::cerr << "manta start: the dashboard did not start (the cluster runs without it): " << port.status().message()
              << std::endl;
    return "";
  }
  // With TLS, other hosts must use HTTPS (plain HTTP is for loopback only).
  const bool loopback = IsLoopbackAddress(o.dashboard_host);
  const std::string host = o.dashboard_host == "0.0.0.0" ? o.node_ip_address : o.dashboard_host;
  const bool https = rpc::ProcessCredentials().tls() && !loopback;
  return (https ? "https://" : "http://") + host + ":" + std::to_string(std::stoi(*port)) + "/";
}

// Publishes the dashboard's URL in the GCS (where `manta job`, on any host, finds the
// Jobs API) and prints it.
void AnnounceDashboard(const std::string& url, const std::string& gcs_address) {
  if (url.empty()) return;
  if (absl::Status s = jobs::PublishDashboardUrl(rpc::MakeChannel(gcs_address, 1 << 20), url); !s.ok()) {
    std::cerr << "manta start: " << s.message() << std::endl;
  }
  std::cout << "Dashboard: " << url << " (it asks for the cluster token once)" << std::endl;
}

// The head's dashboard, started beside the raylet (it needs only the GCS): Launch
// starts it, Url waits for it and returns its URL ("" when it did not start: the
// cluster runs without it, and the reason is printed).
class Dashboard {
 public:
  Dashboard(Launcher& launcher, const StartOptions& o, const Session& session, const std::string& gcs_address)
      : launcher_(launcher), o_(o), session_(session) {
    if (!o.head || o.dashboard_port <= 0) return;
    pid_ = launcher.Launch("manta_dashboard", DashboardArgs(o, session, gcs_address), Role::kDashboard);
  }
  std::string Url() {
    if (!o_.head || o_.dashboard_port <= 0) return "";
    absl::StatusOr<std::string> port =
        pid_.ok() ? launcher_.AwaitReady(*pid_, "manta_dashboard", Role::kDashboard, session_.Path("dashboard.ready"),
                                         nullptr)
                  : absl::StatusOr<std::string>(pid_.status());
    return DashboardUrl(o_, port);
  }

 private:
  Launcher& launcher_;
  const StartOptions& o_;
  const Session& session_;
  absl::StatusOr<pid_t> pid_ = absl::UnknownError("not started");
};

// The configuration of a Redis started for a head: loopback only, protected mode, a
// password, no persistence (the tables are rebuilt from the GCS's writes).
std::string RedisConfig(int port, const std::string& dir, const std::string& password) {
  return "port " + std::to_string(port) +
         "\n"
         "bind 127.0.0.1\n"
         "protected-mode yes\n"
         "requirepass " +
         password +
         "\n"
         "save \"\"\n"
         "appendonly no\n"
         "dir \"" +
         dir + "\"\n";
}

// Waits until a signal arrives or one of the started processes exits.
sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// REQUIRES: TerminationSignals() blocked since before the first process started, so a
// signal that arrives during start-up is not lost (children unblock them at exec).
int Block(Launcher& launcher) {
  sigset_t set = TerminationSignals();
  std::cout << "Blocking until interrupted (Ctrl-C stops this node)." << std::endl;
  for (;;) {
    timespec timeout{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&set, nullptr, &timeout);
    if (sig > 0) break;
    for (const auto& s : launcher.started()) {
      if (ReapIfExited(s.pid)) {
        std::cerr << "manta start: " << RoleName(s.role) << " (pid " << s.pid << ") exited; stopping" << std::endl;
        launcher.Abort();
        return 1;
      }
    }
  }
  // Stop in order: raylets, GCS, Redis (the same order as `manta stop`).
  std::vector<Started> all = launcher.started();
  std::sort(all.begin(), all.end(), [](const Started& a, const Started& b) { return a.role < b.role; });
  for (const auto& s : all) {
    (void)SignalProcess(s.pid, SIGTERM);
    if (!WaitForExit(s.pid, 5000)) {
      (void)SignalProcess(s.pid, SIGKILL);
      WaitForExit(s.pid, 2000);
    }
  }
  launcher.Abort();
  return 0;
}

// The Redis password given to this process (MANTA_REDIS_PASSWORD, or on the pipe
// ray::Init hands it over), taken out of reach of the children ("" when none).
absl::StatusOr<std::string> TakeRedisPassword() {
  std::string password;
  if (const char* env = std::getenv(kRedisPasswordEnv); env != nullptr) password = env;
  unsetenv(kRedisPasswordEnv);
  auto inherited = TakeInheritedSecrets();
  if (!inherited.ok()) return inherited.status();
  if (auto it = inherited->find(kRedisPasswordEnv); it != inherited->end()) password = it->second;
  return password;
}

}  // namespace

// Checks the flags and resolves the addresses they name; an error names the flag.
// --autoscaler (head only, a valid config, made absolute for the daemon), and the
// node type and instance id a provider's launch command gives (flags, else
// $MANTA_NODE_TYPE and $MANTA_INSTANCE_ID).
absl::Status CheckAutoscalerOptions(StartOptions& o) {
  if (!o.autoscaler_config.empty()) {
    if (!o.head) return absl::InvalidArgumentError("--autoscaler runs on the head: give it with --head");
    auto config = autoscaler::AutoscalerConfig::Load(o.autoscaler_config);
    if (!config.ok()) return absl::InvalidArgumentError("--autoscaler: " + std::string(config.status().message()));
    std::error_code ec;
    o.autoscaler_config = std::filesystem::absolute(o.autoscaler_config, ec).string();
  }
  if (o.node_type.empty() && std::getenv("MANTA_NODE_TYPE") != nullptr) o.node_type = std::getenv("MANTA_NODE_TYPE");
  if (o.instance_id.empty() && std::getenv("MANTA_INSTANCE_ID") != nullptr) {
    o.instance_id = std::getenv("MANTA_INSTANCE_ID");
  }
  if (o.head && !o.node_type.empty()) return absl::InvalidArgumentError("--node-type is for nodes that join, not the head");
  if (!o.node_type.empty() && o.instance_id.empty()) {
    return absl::InvalidArgumentError("--node-type needs --instance-id (the provider's name of the machine)");
  }
  return absl::OkStatus();
}

absl::Status CheckStartOptions(StartOptions& o) {
  if (o.head == !o.address.empty()) {
    return absl::InvalidArgumentError(o.head ? "--head and --address are exclusive"
                                              : "give --head to start a new cluster, or --address H:P to join one");
  }
  if (auto s = CheckAutoscalerOptions(o); !s.ok()) return s;
  if (auto r = scheduling::ParseCustomResources(o.resources); !r.ok()) {
    return absl::InvalidArgumentError(std::string(r.status().message()));
  }
  if (!o.system_config.empty()) {
    Config c;
    if (auto s = c.ApplyJson(o.system_config); !s.ok()) {
      return absl::InvalidArgumentError("--system-config: " + std::string(s.message()));
    }
  }
  if (!o.address.empty()) {
    auto hp = ParseHostPort(o.address);
    if (!hp.ok()) return absl::InvalidArgumentError("--address: " + std::string(hp.status().message()));
    // A name (a Kubernetes Service, say) is looked up once: the daemons and the
    // cluster's records use the address.
    auto ip = ResolveIpv4(hp->host);
    if (!ip.ok()) return absl::InvalidArgumentError("--address: " + std::string(ip.status().message()));
    o.address = *ip + ":" + std::to_string(hp->port);
  }
  if (!o.redis_address.empty()) {
    if (auto hp = ParseHostPort(o.redis_address); !hp.ok()) {
      return absl::InvalidArgumentError("--redis-address: " + std::string(hp.status().message()));
    }
  }
  if (auto s = ResolveAddresses(&o); !s.ok()) return s;
  if (o.head && o.port != 0 && IsPortOpen(IsWildcard(o.bind_address) ? "127.0.0.1" : o.bind_address, o.port)) {
    return absl::InvalidArgumentError("port " + std::to_string(o.port) +
                                      " is already in use (another Manta head? pick another with --port)");
  }
  return absl::OkStatus();
}

// The cluster's credentials: a new token for a new cluster (or the one given with
// --token-file); a joining node finds the one of the cluster it joins, and its TLS
// material when it gave none (cluster_tls.h: this machine's session of the cluster,
// or a certificate from the GCS). A head's own CA is made later, in its session.
absl::StatusOr<rpc::Credentials> ClusterCredentials(const StartOptions& o, const Config& config) {
  rpc::Credentials credentials;
  if (auto s = rpc::LoadTls(o.tls, &credentials); !s.ok()) return s;
  if (!o.head) {
    auto hp = *ParseHostPort(o.address);
    if (!IsPortOpen(hp.host, hp.port)) {
      return absl::UnavailableError("cannot reach the GCS at " + o.address + ": nothing listens there");
    }
  }
  if (o.head && !o.token_file.empty()) {
    // A token made beforehand (a Kubernetes Secret, a file copied to every machine).
    auto token = ReadTokenFile(o.token_file);
    if (!token.ok()) return absl::InvalidArgumentError("--token-file: " + std::string(token.status().message()));
    credentials.token = *token;
  } else if (o.head) {
    credentials.token = NewClusterToken();
  } else {
    std::string session;
    auto token = FindClusterToken(o.address, o.token_file, TempRoot(), &session);
    if (!token.ok()) return token.status();
    credentials.token = *token;
    if (!o.tls.enabled()) {
      auto mode = ParseClusterTlsMode(config.cluster_tls);
      if (!mode.ok()) return mode.status();
      std::vector<std::string> names = {o.node_ip_address};
      if (!IsWildcard(o.bind_address)) names.push_back(o.bind_address);
      const std::vector<std::string> addresses = MemberAddresses(ParseHostPort(o.address)->host, names);
      if (auto s = AddMemberTls(o.address, session, *mode, addresses, config.enrollment_timeout_ms, &credentials);
          !s.ok()) {
        return s;
      }
    }
  }
  return credentials;
}

// TLS for the daemons this command starts, kept in the session's tls/ directory when
// not given as --tls-* files: a head for which TLS is due makes a CA of its own (and
// its GCS enrolls other members with it); a joining node keeps the certificate it
// found or was given in ClusterCredentials. Updates `o->tls` and `credentials`.
absl::Status SessionTls(const Config& config, const Session& session, StartOptions* o, rpc::Credentials* credentials) {
  if (o->tls.enabled()) return absl::OkStatus();
  if (o->head) {
    auto mode = ParseClusterTlsMode(config.cluster_tls);
    if (!mode.ok()) return mode.status();
    if (!TlsDueFor(*mode, IsWildcard(o->bind_address) ? "0.0.0.0" : o->bind_address)) return absl::OkStatus();
    std::vector<std::string> names = {o->node_ip_address, "127.0.0.1"};
    if (!IsWildcard(o->bind_address) && o->bind_address != o->node_ip_address) names.push_back(o->bind_address);
    if (auto s = MakeHeadTls(session.dir(), names, config.tls_certificate_lifetime_s); !s.ok()) return s;
    o->tls = SessionTlsPaths(session.dir()).member;
    return rpc::LoadTls(o->tls, credentials);
  }
  if (!credentials->tls()) return absl::OkStatus();
  if (auto s = WriteSessionTls(session.dir(), {credentials->tls_ca, credentials->tls_cert, credentials->tls_key});
      !s.ok()) {
    return s;
  }
  o->tls = SessionTlsPaths(session.dir()).member;
  return absl::OkStatus();
}

// The head's Redis: started here when no --redis-address is given (on a free port,
// retried on a lost race), else checked with a PING. Returns its address.
absl::StatusOr<std::string> StartOrCheckRedis(Launcher& launcher, Session& session, std::string redis_address,
                                              const std::string& redis_password) {
  if (redis_address.empty()) {
    // redis-server cannot bind port 0, so pick a free port and retry on a lost race.
    absl::Status last;
    for (int attempt = 0; attempt < 3 && redis_address.empty(); ++attempt) {
      auto port = PickFreePort();
      if (!port.ok()) return port.status();
      std::string conf = session.Path("redis.conf");
      if (auto s = WriteSecretFile(conf, RedisConfig(*port, session.dir(), redis_password)); !s.ok()) return s;
      gcs::RedisStoreClient::Options ping;
      ping.port = *port;
      ping.password = redis_password;
      ping.connect_timeout_ms = 200;
      auto ready = launcher.Start("redis-server", {conf}, Role::kRedis, "", [&] {
        return IsPortOpen("127.0.0.1", *port) && gcs::RedisStoreClient::RunOnce(ping, {"PING"}).ok();
      });
      if (ready.ok()) {
        redis_address = "127.0.0.1:" + std::to_string(*port);
      } else {
        last = ready.status();
        launcher.Abort();
      }
    }
    if (redis_address.empty()) return last;
  } else {
    auto hp = *ParseHostPort(redis_address);
    gcs::RedisStoreClient::Options ping;
    ping.host = hp.host;
    ping.port = hp.port;
    ping.password = redis_password;
    if (auto r = gcs::RedisStoreClient::RunOnce(ping, {"PING"}); !r.ok()) {
      launcher.Abort();
      return r.status();
    }
  }
  return redis_address;
}

struct HeadAddresses {
  std::string gcs;
  std::string redis;
  int gcs_metrics_port = 0;
};

// A daemon's ready file: "<port> <metrics port>".
struct ReadyPorts {
  int port = 0;
  int metrics_port = 0;
};
ReadyPorts ParseReadyPorts(const std::string& content) {
  ReadyPorts ports;
  std::istringstream(content) >> ports.port >> ports.metrics_port;
  return ports;
}

// Whether the node's traffic is encrypted, and with what.
std::string TlsSummary(const StartOptions& o, const Session& session) {
  if (o.tls.enabled()) {
    return o.tls.cert_file == SessionTlsPaths(session.dir()).member.cert_file
               ? "on, certificates of the cluster's own CA (" + session.dir() + "/tls)"
               : "on, with the certificates given";
  }
  return IsLoopbackAddress(o.bind_address) ? "off: nothing listens beyond this machine's loopback"
                                           : "off (cluster_tls=off): traffic between machines is readable";
}

// What `manta start` tells its user once the node is up.
void PrintStarted(const StartOptions& o, const Session& session, const HeadAddresses& head, ReadyPorts raylet) {
  std::cout << (o.head ? "Manta head node started." : "Manta node started and joined the cluster.") << "\n";
  std::cout << "  GCS address:      " << head.gcs << "\n";
  if (o.head) std::cout << "  Redis address:    " << head.redis << "\n";
  std::cout << "  Raylet port:      " << raylet.port << "\n";
  // The Prometheus endpoints, from the daemons' ready files.
  std::cout << "  Metrics:          " << MetricsUrl(o.node_ip_address, raylet.metrics_port) << "\n";
  if (o.head) {
    std::cout << "  GCS metrics:      " << MetricsUrl(o.node_ip_address, head.gcs_metrics_port) << "\n";
  }
  std::cout << "  Session dir:      " << session.dir() << "\n";
  std::cout << "  TLS:              " << TlsSummary(o, session) << "\n";
  std::cout << "  Cluster token:    " << session.TokenFile() << " (keep it private)\n";
  if (!IsLoopbackAddress(o.bind_address)) {
    std::cout << "  Listening on:     " << o.bind_address << " (reachable from other machines; every connection "
              << "must present the cluster token"
              << (o.tls.enabled() ? ", over TLS" : "; traffic is not encrypted") << ")\n";
  }
  if (o.head) {
    std::cout << "\nTo add another node to this cluster from this machine, run\n"
              << "  manta start --address " << head.gcs << "\n"
              << "From another machine, copy the token file there (mode 0600) and add --token-file <path>.\n";
  }
  std::cout << "To see the cluster: manta status\nTo stop: manta stop" << std::endl;
}

// The head's Redis (started or checked) and GCS.
absl::StatusOr<HeadAddresses> StartHeadDaemons(Launcher& launcher, Session* session, const StartOptions& o,
                                               const std::string& inherited_redis_password) {
  // The Redis password: given (flag or MANTA_REDIS_PASSWORD), else a random one for
  // a Redis started here. It lives in a 0600 file of the session, never on a command line.
  std::string redis_password = o.redis_password;
  if (redis_password.empty()) redis_password = inherited_redis_password;
  if (redis_password.empty() && o.redis_address.empty()) redis_password = SecureRandomHex(24);
  if (!redis_password.empty()) {
    if (auto s = WriteSecretFile(session->Path("redis_password"), redis_password); !s.ok()) return s;
  }
  auto redis = StartOrCheckRedis(launcher, *session, o.redis_address, redis_password);
  if (!redis.ok()) return redis.status();
  const std::string redis_address = *redis;
  std::vector<std::string> gcs_args = {"--port", std::to_string(o.port), "--bind-address", o.bind_address,
                                       "--metrics-export-port", std::to_string(o.gcs_metrics_export_port),
                                       "--redis-address", redis_address,
                                       "--ready-file", session->Path("gcs.ready"), "--log-dir", session->LogDir()};
  for (std::string& arg : SecurityArgs(o, *session)) gcs_args.push_back(std::move(arg));
  // A CA of the cluster's own (SessionTls): the GCS enrolls members with it.
  const std::string ca_key = SessionTlsPaths(session->dir()).ca_key;
  std::error_code no_ca;
  if (std::filesystem::exists(ca_key, no_ca)) gcs_args.insert(gcs_args.end(), {"--tls-ca-key", ca_key});
  if (!redis_password.empty()) {
    gcs_args.insert(gcs_args.end(), {"--redis-password-file", session->Path("redis_password")});
  }
  if (!o.system_config.empty()) gcs_args.insert(gcs_args.end(), {"--system-config", o.system_config});
  auto gcs_port = launcher.Start("manta_gcs", gcs_args, Role::kGcs, session->Path("gcs.ready"));
  if (!gcs_port.ok()) {
    launcher.Abort();
    return gcs_port.status();
  }
  const ReadyPorts ports = ParseReadyPorts(*gcs_port);
  return HeadAddresses{o.node_ip_address + ":" + std::to_string(ports.port), redis_address, ports.metrics_port};
}

// The head's autoscaler (--autoscaler), once the head's daemons run; waits until it
// has made its first update.
absl::Status StartAutoscaler(Launcher& launcher, const StartOptions& o, const Session& session,
                             const std::string& gcs_address) {
  if (o.autoscaler_config.empty()) return absl::OkStatus();
  std::vector<std::string> args = {"--gcs-address", gcs_address, "--config", o.autoscaler_config,
                                   "--log-dir", session.LogDir(), "--ready-file", session.Path("autoscaler.ready")};
  for (std::string& arg : SecurityArgs(o, session)) args.push_back(std::move(arg));
  auto started = launcher.Start("manta_autoscaler", args, Role::kAutoscaler, session.Path("autoscaler.ready"));
  return started.ok() ? absl::OkStatus() : started.status();
}

int RunStart(const StartOptions& options) {
  StartOptions o = options;
  if (auto s = CheckStartOptions(o); !s.ok()) return Error(std::string(s.message()));
  auto config = Config::Load(o.system_config);
  if (!config.ok()) return Error(std::string(config.status().message()));
  auto credentials = ClusterCredentials(o, *config);
  if (!credentials.ok()) return Error(std::string(credentials.status().message()));
  rpc::SetProcessCredentials(*credentials);
  // The daemons read it from the session's file: it must not linger in their
  // environment (nor in Redis's), where /proc shows it. The Redis password likewise
  // (from MANTA_REDIS_PASSWORD, or a pipe from ray::Init starting a local cluster).
  unsetenv(kClusterTokenEnv);
  auto inherited_redis_password = TakeRedisPassword();
  if (!inherited_redis_password.ok()) return Error(std::string(inherited_redis_password.status().message()));
  if (!o.head) {
    if (auto s = CheckGcsReachable(o.address); !s.ok()) return Error(std::string(s.message()));
  }

  if (o.block) {
    sigset_t set = TerminationSignals();
    sigprocmask(SIG_BLOCK, &set, nullptr);
  }
  auto session = Session::Create();
  if (!session.ok()) return Error(std::string(session.status().message()));
  if (auto s = WriteTokenFile(session->TokenFile(), credentials->token); !s.ok()) {
    return Error(std::string(s.message()));
  }
  if (auto s = SessionTls(*config, *session, &o, &*credentials); !s.ok()) return Error(std::string(s.message()));
  rpc::SetProcessCredentials(*credentials);
  Launcher launcher(*session);
  HeadAddresses head{o.address, o.redis_address};
  if (o.head) {
    auto started = StartHeadDaemons(launcher, &*session, o, *inherited_redis_password);
    if (!started.ok()) return Error(std::string(started.status().message()));
    head = *started;
  }
  const std::string& gcs_address = head.gcs;
  // The dashboard starts while the raylet does (it needs only the GCS).
  Dashboard dashboard(launcher, o, *session, gcs_address);
  auto raylet_port =
      launcher.Start("manta_raylet", RayletArgs(o, *session, gcs_address), Role::kRaylet, session->Path("raylet.ready"));
  if (!raylet_port.ok()) {
    launcher.Abort();
    return Error(std::string(raylet_port.status().message()));
  }
  const std::string dashboard_url = dashboard.Url();
  (void)session->WriteGcsAddress(gcs_address);
  const ReadyPorts raylet = ParseReadyPorts(*raylet_port);
  (void)WriteFileAtomic(session->Path("raylet_address"), o.node_ip_address + ":" + std::to_string(raylet.port) + "\n",
                        0600);
  if (o.head) (void)WriteHeadAddress(gcs_address);
  if (auto s = StartAutoscaler(launcher, o, *session, gcs_address); !s.ok()) {
    launcher.Abort();
    return Error(std::string(s.message()));
  }
  PrintStarted(o, *session, head, raylet);
  AnnounceDashboard(dashboard_url, gcs_address);
  if (o.block) return Block(launcher);
  return 0;
}

}  // namespace manta::cli
