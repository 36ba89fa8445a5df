// Secrets and private files: secure random bytes, the cluster token, HMAC, the
// per-user temp root, and how a process finds the token of the cluster it joins.
//
// The cluster token is 32 random bytes written as 64 lowercase hex digits. `manta
// start --head` makes it and keeps it in <session>/cluster_token (0600) under a 0700
// temp root; whoever can read that file may use the cluster, nobody else can. It
// reaches a daemon as a file path (--token-file) or in MANTA_CLUSTER_TOKEN, which the
// daemon unsets at once; a worker gets it, with its startup token, on the secrets
// pipe its raylet hands it (ProcessOptions::secrets, TakeInheritedSecrets in
// process.h). Never on a command line. All functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace manta {

// The names under which a process is given the token: the environment variables a
// daemon, driver or CLI reads, and the keys of a worker's secrets pipe.
inline constexpr char kClusterTokenEnv[] = "MANTA_CLUSTER_TOKEN";
inline constexpr char kClusterTokenFileEnv[] = "MANTA_CLUSTER_TOKEN_FILE";
// The Redis password `manta start --head` takes, and the one-time token a raylet
// gives each worker it starts (both handed over as ProcessOptions::secrets).
inline constexpr char kRedisPasswordEnv[] = "MANTA_REDIS_PASSWORD";
inline constexpr char kWorkerStartupTokenEnv[] = "MANTA_WORKER_STARTUP_TOKEN";
// The token's file in a session directory.
inline constexpr char kClusterTokenFileName[] = "cluster_token";

// `n` bytes from the kernel's CSPRNG (getrandom). Aborts only if the kernel has none.
void FillSecureRandom(uint8_t* out, size_t n);
// `n` secure random bytes as 2n hex digits.
std::string SecureRandomHex(size_t n);

// A new cluster token (64 hex digits).
std::string NewClusterToken();
// OK when `token` has the form of a cluster token; InvalidArgument naming what is wrong
// (never the token itself).
absl::Status CheckTokenFormat(std::string_view token);
// Compares in time that depends only on the lengths, not on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// HMAC-SHA256 of `message` under `key`: 32 bytes.
// Aborts if OpenSSL fails (never returns a MAC both sides could agree on by failing).
std::string HmacSha256(std::string_view key, std::string_view message);
// SHA-256 of `data`: 32 bytes. Aborts if OpenSSL fails.
std::string Sha256(std::string_view data);

// Reads a secret from a file of this user that no one else may read (the trailing
// newline removed). PermissionDenied, saying how to fix it, for a file of another
// user or one readable by group or others; a symbolic link is not followed.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);
// Writes `secret` and a newline to `path` with mode 0600 (atomically).
absl::Status WriteSecretFile(const std::string& path, const std::string& secret);

// Writes `token` to `path` with mode 0600 (atomically).
absl::Status WriteTokenFile(const std::string& path, const std::string& token);
// Reads a token file. Refuses one that is not ours, is readable by group or others
// (PermissionDenied saying how to fix it), or does not hold a token.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// $MANTA_TEMP_DIR, or /tmp/manta-<uid>.
std::string TempRoot();
// Creates `dir` (and missing parents, 0700) when missing. A `dir` owned by another user
// or a symbolic link is refused; our own is tightened to 0700.
absl::Status EnsurePrivateDir(const std::string& dir);

// The token of the cluster whose GCS is at `gcs_address`, from the first of:
// `token_file` when not empty, $MANTA_CLUSTER_TOKEN_FILE, $MANTA_CLUSTER_TOKEN, or the
// session on this machine (under `temp_root`, and under its private/ roots of
// clusters started by ray::Init) that records that GCS address. NotFound says where
// it looked and how to give the token.
// With `session_dir`, it is set to that session's directory ("" when this machine has
// none), found by the same one look through the sessions.
absl::StatusOr<std::string> FindClusterToken(const std::string& gcs_address, const std::string& token_file,
                                             const std::string& temp_root, std::string* session_dir = nullptr);
// The token recorded by the session under `temp_root`/sessions whose gcs_address is
// `gcs_address`; NotFound when there is none.
absl::StatusOr<std::string> FindSessionToken(const std::string& temp_root, const std::string& gcs_address);
// The directory of that session (the newest, when several record the address).
absl::StatusOr<std::string> FindSessionDir(const std::string& temp_root, const std::string& gcs_address);
// The session of the cluster at `gcs_address` on this machine: under `temp_root`,
// else under one of its private/ roots (clusters started by ray::Init).
absl::StatusOr<std::string> FindClusterSession(const std::string& gcs_address, const std::string& temp_root);

// Reads the token a daemon was started with: `token_file` when not empty, else
// $MANTA_CLUSTER_TOKEN. The variable is removed from the environment either way, so
// that programs the daemon starts do not inherit it by accident.
absl::StatusOr<std::string> LoadDaemonToken(const std::string& token_file);

}  // namespace manta
