#include "src/common/security.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "src/common/id.h"
#include "src/common/util.h"

namespace manta {

namespace fs = std::filesystem;

namespace {

constexpr size_t kTokenBytes = 32;

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

void FillSecureRandom(uint8_t* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = getrandom(out + done, n - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      PLOG(FATAL) << "getrandom failed: the kernel has no random source";
    }
    done += static_cast<size_t>(got);
  }
}

std::string SecureRandomHex(size_t n) {
  std::string bytes(n, '\0');
  FillSecureRandom(reinterpret_cast<uint8_t*>(bytes.data()), n);
  return BytesToHex(reinterpret_cast<const uint8_t*>(bytes.data()), n);
}

std::string NewClusterToken() { return SecureRandomHex(kTokenBytes); }

absl::Status CheckTokenFormat(std::string_view token) {
  if (token.size() != 2 * kTokenBytes) {
    return absl::InvalidArgumentError("a cluster token is " + std::to_string(2 * kTokenBytes) +
                                      " hex digits; this one has " + std::to_string(token.size()) + " characters");
  }
  for (char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return absl::InvalidArgumentError("a cluster token is lowercase hex digits only");
    }
  }
  return absl::OkStatus();
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string HmacSha256(std::string_view key, std::string_view message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // A failure would leave `out` unset: two sides that both failed would agree on an
  // empty MAC. OpenSSL without SHA-256 cannot protect anything; stop.
  CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len) != nullptr &&
        len == 32)
      << "HMAC-SHA256 failed in OpenSSL";
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string Sha256(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  CHECK(EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr) == 1 && len == 32)
      << "SHA-256 failed in OpenSSL";
  return std::string(reinterpret_cast<const char*>(out), len);
}

absl::Status WriteSecretFile(const std::string& path, const std::string& secret) {
  return WriteFileAtomic(path, secret + "\n", 0600);
}

absl::Status WriteTokenFile(const std::string& path, const std::string& token) {
  if (auto s = CheckTokenFormat(token); !s.ok()) return s;
  return WriteSecretFile(path, token);
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return absl::NotFoundError("no file " + path);
    return absl::PermissionDeniedError("cannot read " + path + ": " + std::strerror(err));
  }
  struct stat st;
  std::string text;
  absl::Status status;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(path + " is not a regular file");
  } else if (st.st_uid != geteuid()) {
    status = absl::PermissionDeniedError(path + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user");
  } else if ((st.st_mode & 077) != 0) {
    status = absl::PermissionDeniedError(path + " is readable by other users; make it private with `chmod 600 " +
                                         path + "`");
  } else {
    char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0 && text.size() < 4096) text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (!status.ok()) return status;
  return Trimmed(std::move(text));
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadSecretFile(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return absl::NotFoundError("no token file " + path);
    return absl::Status(text.status().code(), "the token file: " + std::string(text.status().message()));
  }
  if (auto s = CheckTokenFormat(*text); !s.ok()) {
    return absl::InvalidArgumentError("the token file " + path + " holds no cluster token: " + std::string(s.message()));
  }
  return text;
}

std::string TempRoot() {
  std::string env = Env("MANTA_TEMP_DIR");
  return env.empty() ? "/tmp/manta-" + std::to_string(geteuid()) : env;
}

absl::Status EnsurePrivateDir(const std::string& dir) {
  std::error_code ec;
  fs::path path(dir);
  if (path.has_parent_path() && !fs::exists(path.parent_path(), ec)) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) return absl::PermissionDeniedError("cannot create " + path.parent_path().string() + ": " + ec.message());
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError("cannot create " + dir + ": " + std::strerror(errno));
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return absl::PermissionDeniedError("cannot inspect " + dir + ": " + std::strerror(errno));
  if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(dir + " is not a directory (a symbolic link?); refusing to keep secrets there");
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(dir + " belongs to uid " + std::to_string(st.st_uid) +
                                       ", not to this user; set MANTA_TEMP_DIR to a directory of your own");
  }
  if ((st.st_mode & 07777) != 0700 && chmod(dir.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError("cannot make " + dir + " private (chmod 700): " + std::strerror(errno));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FindSessionDir(const std::string& temp_root, const std::string& gcs_address) {
  // A session left by a cluster that died without `manta stop` may record the same
  // address as the one running now: the session that recorded it last is the one.
  std::error_code ec;
  fs::path newest;
  fs::file_time_type newest_time;
  for (const auto& session : fs::directory_iterator(fs::path(temp_root) / "sessions", ec)) {
    const fs::path recorded = session.path() / "gcs_address";
    auto address = ReadFile(recorded.string());
    if (!address.ok() || Trimmed(*address) != gcs_address) continue;
    std::error_code time_error;
    fs::file_time_type written = fs::last_write_time(recorded, time_error);
    if (time_error || !fs::exists(session.path() / kClusterTokenFileName)) continue;
    if (newest.empty() || written > newest_time) {
      newest = session.path();
      newest_time = written;
    }
  }
  if (!newest.empty()) return newest.string();
  return absl::NotFoundError("no session under " + temp_root + " records the cluster at " + gcs_address);
}

absl::StatusOr<std::string> FindSessionToken(const std::string& temp_root, const std::string& gcs_address) {
  auto dir = FindSessionDir(temp_root, gcs_address);
  if (!dir.ok()) return dir.status();
  return ReadTokenFile((fs::path(*dir) / kClusterTokenFileName).string());
}

absl::StatusOr<std::string> FindClusterSession(const std::string& gcs_address, const std::string& temp_root) {
  auto found = FindSessionDir(temp_root, gcs_address);
  if (found.ok() || !absl::IsNotFound(found.status())) return found;
  std::error_code ec;
  for (const auto& root : fs::directory_iterator(fs::path(temp_root) / "private", ec)) {
    auto dir = FindSessionDir(root.path().string(), gcs_address);
    if (dir.ok() || !absl::IsNotFound(dir.status())) return dir;
  }
  return found;
}

absl::StatusOr<std::string> FindClusterToken(const std::string& gcs_address, const std::string& token_file,
                                             const std::string& temp_root, std::string* session_dir) {
  absl::StatusOr<std::string> session = absl::NotFoundError("not looked for");
  if (session_dir != nullptr) {
    session = FindClusterSession(gcs_address, temp_root);
    *session_dir = session.ok() ? *session : "";
  }
  if (!token_file.empty()) return ReadTokenFile(token_file);
  if (std::string file = Env(kClusterTokenFileEnv); !file.empty()) {
    auto token = ReadTokenFile(file);
    if (!token.ok()) return absl::Status(token.status().code(), std::string(kClusterTokenFileEnv) + ": " +
                                                                    std::string(token.status().message()));
    return token;
  }
  if (std::string token = Env(kClusterTokenEnv); !token.empty()) {
    if (auto s = CheckTokenFormat(token); !s.ok()) {
      return absl::InvalidArgumentError(std::string(kClusterTokenEnv) + ": " + std::string(s.message()));
    }
    return token;
  }
  if (session_dir == nullptr) session = FindClusterSession(gcs_address, temp_root);
  if (session.ok()) return ReadTokenFile((fs::path(*session) / kClusterTokenFileName).string());
  if (!absl::IsNotFound(session.status())) return session.status();
  return absl::NotFoundError("no cluster token for the cluster at " + gcs_address + ": no session under " +
                             temp_root + " records it. Copy the head's <session>/" + kClusterTokenFileName +
                             " here (mode 0600) and give its path with --token-file or " + kClusterTokenFileEnv +
                             ", or set " + kClusterTokenEnv);
}

absl::StatusOr<std::string> LoadDaemonToken(const std::string& token_file) {
  std::string from_env = Env(kClusterTokenEnv);
  unsetenv(kClusterTokenEnv);
  if (!token_file.empty()) return ReadTokenFile(token_file);
  if (from_env.empty()) {
    return absl::InvalidArgumentError(std::string("no cluster token: give --token-file or set ") + kClusterTokenEnv +
                                      " (`manta start` does this)");
  }
  if (auto s = CheckTokenFormat(from_env); !s.ok()) {
    return absl::InvalidArgumentError(std::string(kClusterTokenEnv) + ": " + std::string(s.message()));
  }
  return from_env;
}

}  // namespace manta
