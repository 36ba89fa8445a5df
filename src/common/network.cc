#include "src/common/network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace manta {
namespace {

std::string ToText(const in_addr& addr) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

// Interfaces that are up, with their IPv4 address; `skip_loopback` leaves lo out.
std::vector<std::string> InterfaceAddresses(bool skip_loopback) {
  std::vector<std::string> out;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return out;
  for (ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0) continue;
    if (skip_loopback && (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    out.push_back(ToText(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr));
  }
  freeifaddrs(all);
  return out;
}

}  // namespace

std::vector<std::string> LocalIpv4Addresses() { return InterfaceAddresses(false); }

bool IsLoopbackAddress(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::string PeerHostForLimit(int fd, bool count_loopback) {
  const std::string peer = SocketPeerName(fd);
  std::string host = peer.substr(0, peer.rfind(':'));
  return !count_loopback && IsLoopbackAddress(host) ? "" : host;
}

bool IsLocalAddress(const std::string& host) {
  if (IsLoopbackAddress(host)) return true;
  std::vector<std::string> local = LocalIpv4Addresses();
  return std::find(local.begin(), local.end(), host) != local.end();
}

std::string FirstExternalIpv4() {
  std::vector<std::string> external = InterfaceAddresses(true);
  return external.empty() ? "" : external.front();
}

absl::StatusOr<std::string> SourceAddressTo(const std::string& host) {
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);  // any port: a UDP connect sends nothing
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &peer.sin_addr) != 1) {
    return absl::InvalidArgumentError("'" + host + "' is not a numeric IPv4 address");
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::string("socket: ") + strerror(errno));
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) {
    int err = errno;
    close(fd);
    return absl::UnavailableError("no route to " + host + ": " + strerror(err));
  }
  close(fd);
  return ToText(self.sin_addr);
}

std::string SocketPeerName(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown peer";
  return ToText(addr.sin_addr) + ":" + std::to_string(ntohs(addr.sin_port));
}

absl::StatusOr<std::string> ResolveIpv4(const std::string& host) {
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int err = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (err != 0 || found == nullptr) {
    return absl::NotFoundError("cannot resolve '" + host + "' to an IPv4 address: " + gai_strerror(err));
  }
  std::string ip = ToText(reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr);
  freeaddrinfo(found);
  return ip;
}

}  // namespace manta
