#include "src/jobs/package.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <system_error>

#include "src/common/id.h"
#include "src/common/security.h"

namespace manta::jobs {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "MANTAPKG1\n";

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

bool ReadVarint(const std::string& in, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in[(*pos)++]);
    *value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// A path from an archive is safe to create under the directory: relative, no empty,
// "." or ".." parts.
bool SafeRelativePath(const std::string& path) {
  if (path.empty() || path.size() > 4096 || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

absl::Status WriteNewFile(const std::string& path, const char* data, size_t size, bool executable) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, executable ? 0755 : 0644);
  if (fd < 0) return absl::InvalidArgumentError("cannot create " + path + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      return absl::ResourceExhaustedError("writing " + path + ": " + why);
    }
    written += static_cast<size_t>(n);
  }
  return close(fd) == 0 ? absl::OkStatus() : absl::ResourceExhaustedError("writing " + path);
}

absl::Status UnpackInto(const std::string& archive, const std::string& dir, const PackageLimits& limits) {
  const size_t magic = sizeof(kMagic) - 1;
  if (archive.compare(0, magic, kMagic) != 0) return absl::InvalidArgumentError("not a working-dir archive");
  size_t pos = magic;
  int64_t files = 0;
  int64_t bytes = 0;
  while (pos < archive.size()) {
    uint64_t path_size = 0;
    uint64_t size = 0;
    if (!ReadVarint(archive, &pos, &path_size) || path_size > archive.size() - pos) {
      return absl::InvalidArgumentError("a working-dir archive is cut short");
    }
    const std::string path = archive.substr(pos, path_size);
    pos += path_size;
    if (pos >= archive.size()) return absl::InvalidArgumentError("a working-dir archive is cut short");
    const bool executable = archive[pos++] == 1;
    if (!ReadVarint(archive, &pos, &size) || size > archive.size() - pos) {
      return absl::InvalidArgumentError("a working-dir archive is cut short");
    }
    if (!SafeRelativePath(path)) return absl::InvalidArgumentError("a working-dir archive names '" + path + "'");
    if (++files > limits.max_files || (bytes += static_cast<int64_t>(size)) > limits.max_bytes) {
      return absl::InvalidArgumentError("a working-dir archive is over the limits (" +
                                        std::to_string(limits.max_files) + " files, " +
                                        std::to_string(limits.max_bytes) + " bytes)");
    }
    const fs::path target = fs::path(dir) / path;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) return absl::ResourceExhaustedError("cannot create " + target.parent_path().string() + ": " + ec.message());
    if (absl::Status s = WriteNewFile(target.string(), archive.data() + pos, size, executable); !s.ok()) return s;
    pos += size;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> PackDirectory(const std::string& dir, const PackageLimits& limits) {
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(root)) return absl::InvalidArgumentError("--working-dir " + dir + " is not a directory");
  std::map<std::string, fs::path> files;  // relative path -> the file to read (sorted: the same dir, the same id)
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path relative = it->path().lexically_relative(root);
    if (it->is_symlink()) {
      const fs::path target = fs::weakly_canonical(it->path(), ec);
      const fs::path inside = target.lexically_relative(root);
      if (ec || inside.empty() || *inside.begin() == ".." || !fs::is_regular_file(target)) {
        return absl::InvalidArgumentError("--working-dir: " + relative.string() + " is a link to " + target.string() +
                                          ", which is not a file inside " + root.string());
      }
      files[relative.generic_string()] = target;
    } else if (it->is_regular_file()) {
      files[relative.generic_string()] = it->path();
    }
    if (static_cast<int64_t>(files.size()) > limits.max_files) {
      return absl::InvalidArgumentError("--working-dir " + dir + " has more than " +
                                        std::to_string(limits.max_files) + " files");
    }
  }
  if (ec) return absl::InvalidArgumentError("reading --working-dir " + dir + ": " + ec.message());
  std::string archive = kMagic;
  int64_t bytes = 0;
  for (const auto& [relative, path] : files) {
    std::ifstream in(path, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return absl::InvalidArgumentError("cannot read " + path.string());
    bytes += static_cast<int64_t>(content.size());
    if (bytes > limits.max_bytes) {
      return absl::InvalidArgumentError("--working-dir " + dir + " holds more than " +
                                        std::to_string(limits.max_bytes) + " bytes (job_working_dir_max_bytes)");
    }
    AppendVarint(relative.size(), &archive);
    archive += relative;
    archive.push_back((fs::status(path).permissions() & fs::perms::owner_exec) != fs::perms::none ? 1 : 0);
    AppendVarint(content.size(), &archive);
    archive += content;
  }
  return archive;
}

absl::Status UnpackArchive(const std::string& archive, const std::string& dir, const PackageLimits& limits) {
  if (mkdir(dir.c_str(), 0755) != 0) return absl::InternalError("cannot create " + dir + ": " + std::strerror(errno));
  absl::Status s = UnpackInto(archive, dir, limits);
  if (!s.ok()) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return s;
}

std::string PackageId(const std::string& archive) { return BinaryHex(Sha256(archive)); }

bool IsPackageId(const std::string& id) {
  if (id.size() != 64) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace manta::jobs
