// A job's working directory as `manta job submit --working-dir DIR` uploads it to the
// head: its regular files packed into one archive (content-addressed by its SHA-256),
// unpacked on the head into a directory the entrypoint starts in.
//
// Archive: "MANTAPKG1\n", then per file: its path relative to DIR (varint length,
// '/'-separated), one byte (1 = executable), its size (varint) and its bytes. Only
// regular files (and the directories holding them) are kept; a symbolic link to a
// regular file inside DIR is packed as that file, and one leading out of DIR (or to a
// directory) is refused, naming it.
//
// Unpacking trusts nothing: every path must be relative, without "." or ".." parts
// or empty ones, within the limits of files and bytes; a file is never written
// through a link; on any error the directory is removed (nothing half-made is left).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace manta::jobs {

struct PackageLimits {
  int64_t max_bytes = int64_t{100} << 20;  // the files' bytes in all
  int64_t max_files = 10000;
};

// Packs `dir`. InvalidArgument naming what is wrong: not a directory, a link leaving
// it, over the limits.
absl::StatusOr<std::string> PackDirectory(const std::string& dir, const PackageLimits& limits);
// Unpacks `archive` into `dir` (created; it must not exist).
absl::Status UnpackArchive(const std::string& archive, const std::string& dir, const PackageLimits& limits);
// The archive's id: the hex SHA-256 of its bytes (64 lowercase hex digits).
std::string PackageId(const std::string& archive);
bool IsPackageId(const std::string& id);

}  // namespace manta::jobs
