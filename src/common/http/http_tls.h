// The OpenSSL context of Manta's HTTPS server and client (src/common/http): TLS 1.2
// or later, peers verified against the cluster's CA.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include "absl/status/statusor.h"
#include "src/common/http/http_server.h"

namespace manta::http {

// A server's context asks for a client certificate and, when one comes, verifies it
// against tls.ca_pem (one from elsewhere fails the handshake). A client's verifies
// the server's certificate against tls.ca_pem and presents tls.cert_pem when given.
// InvalidArgument names the part that does not load.
absl::StatusOr<boost::asio::ssl::context> MakeTlsContext(const HttpTls& tls, bool server);

}  // namespace manta::http
