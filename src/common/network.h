// This machine's network addresses, as a process on it sees them (its network
// namespace): which IPv4 addresses are local, and which one the kernel would use
// to reach a given host. Used by drivers to find their own host's raylet, and by
// `manta start` to pick an address to advertise. All thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace manta {

// The IPv4 addresses of every interface that is up, loopback included.
std::vector<std::string> LocalIpv4Addresses();
// Whether `host` names this machine: "localhost", any 127.0.0.0/8 address, or an
// address of an interface that is up.
bool IsLocalAddress(const std::string& host);
// Whether `host` is "localhost", ::1 or in 127.0.0.0/8.
bool IsLoopbackAddress(const std::string& host);
// The host a connected socket's peer counts against in a per-host connection limit:
// its IP address, or "" (no limit of its own) for a loopback peer unless
// `count_loopback` (every local process shares that address; tests count it).
std::string PeerHostForLimit(int fd, bool count_loopback);
// The first IPv4 address of an interface that is up and not loopback; "" if none.
std::string FirstExternalIpv4();
// The local address the kernel routes through to reach `host` (numeric IPv4 or
// "localhost"): a UDP socket is connected, nothing is sent. Error when there is
// no route or `host` is not an IPv4 address.
absl::StatusOr<std::string> SourceAddressTo(const std::string& host);
// `host` as a numeric IPv4 address: itself when it is one, else the first IPv4
// address the resolver gives for the name. NotFound naming the host otherwise.
absl::StatusOr<std::string> ResolveIpv4(const std::string& host);
// "ip:port" of the peer of a connected IPv4 socket, for logs.
std::string SocketPeerName(int fd);

}  // namespace manta
