#include "src/cli/session.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/common/id.h"
#include "src/common/process.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::cli {

namespace fs = std::filesystem;

absl::StatusOr<Session> Session::Create() {
  uint8_t rnd[4];
  FillRandom(rnd, sizeof(rnd));
  std::string name = "session_" + std::to_string(NowMs()) + "_" + std::to_string(getpid()) + "_" +
                     BytesToHex(rnd, sizeof(rnd));
  if (auto s = EnsurePrivateDir(TempRoot()); !s.ok()) return s;
  Session s;
  s.dir_ = TempRoot() + "/sessions/" + name;
  // Private all the way down, whatever the umask: logs name objects and peers.
  for (const std::string& dir : {TempRoot() + "/sessions", s.dir_, s.dir_ + "/logs", s.dir_ + "/pids"}) {
    if (auto status = EnsurePrivateDir(dir); !status.ok()) {
      return absl::PermissionDeniedError("cannot create session directory " + s.dir_ + ": " +
                                         std::string(status.message()));
    }
  }
  return s;
}

absl::Status Session::Record(pid_t pid, Role role, const std::string& exe_name) const {
  std::string file = dir_ + "/pids/" + std::to_string(static_cast<int>(role)) + "_" + RoleName(role) + "_" +
                     std::to_string(pid) + ".pid";
  return WriteFileAtomic(file, std::to_string(pid) + " " + exe_name + "\n", 0600);
}

absl::Status Session::WriteGcsAddress(const std::string& address) const {
  return WriteFileAtomic(dir_ + "/gcs_address", address + "\n", 0600);
}

std::string Session::TokenFile() const { return dir_ + "/" + kClusterTokenFileName; }

std::vector<ProcessRecord> ListRecords() { return manta::ListRecords(TempRoot()); }

namespace {

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

absl::StatusOr<std::string> LatestHeadAddress() {
  if (auto text = ReadFile(TempRoot() + "/head_address"); text.ok()) return Trimmed(*text);
  // No head here: the cluster that the newest node started on this machine joined.
  std::string newest_session;
  for (const ProcessRecord& r : ListRecords()) {
    if (r.role == Role::kRaylet && r.session_dir > newest_session && IsProcessAlive(r.pid)) newest_session = r.session_dir;
  }
  if (!newest_session.empty()) {
    if (auto text = ReadFile(newest_session + "/gcs_address"); text.ok()) return Trimmed(*text);
  }
  return absl::NotFoundError("no running Manta cluster found on this machine (start one with "
                             "`manta start --head`, or pass --address)");
}

absl::Status WriteHeadAddress(const std::string& address) {
  return WriteFileAtomic(TempRoot() + "/head_address", address + "\n", 0600);
}

}  // namespace manta::cli
