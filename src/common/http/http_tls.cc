#include "src/common/http/http_tls.h"

#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"

namespace manta::http {

namespace asio = boost::asio;

absl::StatusOr<asio::ssl::context> MakeTlsContext(const HttpTls& tls, bool server) {
  asio::ssl::context ctx(server ? asio::ssl::context::tls_server : asio::ssl::context::tls_client);
  boost::system::error_code ec;
  auto fail = [&ec](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("the HTTPS ", what, " does not load: ", ec.message()));
  };
  ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                  asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  if (server || !tls.cert_pem.empty()) {
    if (ctx.use_certificate_chain(asio::buffer(tls.cert_pem), ec); ec) return fail("certificate");
    if (ctx.use_private_key(asio::buffer(tls.key_pem), asio::ssl::context::pem, ec); ec) return fail("key");
    if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
      return absl::InvalidArgumentError("the HTTPS key is not the certificate's");
    }
  }
  if (ctx.add_certificate_authority(asio::buffer(tls.ca_pem), ec); ec) return fail("CA");
  ctx.set_verify_mode(asio::ssl::verify_peer, ec);
  return ctx;
}

}  // namespace manta::http
