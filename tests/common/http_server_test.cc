// HttpServer on 127.0.0.1 (port 0) with a plain-socket client: routing, decoding,
// keep-alive, the limits (400/413/431/503, idle timeout), handler failures, peers
// that leave early, and Stop() with connections open.
#include "src/common/http/http_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "test_util/test_util.h"

namespace manta::http {
namespace {

using manta::testing::WaitFor;

struct Reply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  std::string Get(const std::string& name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return "";
  }
  int Count(const std::string& name) const {
    int count = 0;
    for (const auto& [key, value] : headers) count += key == name;
    return count;
  }
};

// A blocking client socket; every receive waits at most 5 s.
class Client {
 public:
  explicit Client(int port) : fd_(manta::testing::ConnectTcp("127.0.0.1", port)) {
    EXPECT_GE(fd_, 0);
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads one response (for a HEAD request, `head`: no body whatever Content-Length
  // says); nullopt when the connection ends or stalls first.
  std::optional<Reply> Read(bool head = false) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (buffer_.size() > (1 << 20) || !Fill()) return std::nullopt;
    }
    Reply reply;
    std::string head_text = buffer_.substr(0, end);
    size_t line_end = head_text.find("\r\n");
    std::string status_line = head_text.substr(0, line_end);
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return std::nullopt;
    reply.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      size_t next = head_text.find("\r\n", line_end + 2);
      std::string line = head_text.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      reply.headers.emplace_back(name, value);
      line_end = next;
    }
    size_t length = head || reply.Get("content-length").empty() ? 0 : std::stoul(reply.Get("content-length"));
    while (buffer_.size() < end + 4 + length) {
      if (!Fill()) return std::nullopt;
    }
    reply.body = buffer_.substr(end + 4, length);
    buffer_.erase(0, end + 4 + length);
    return reply;
  }

  // Sends `request` and reads its response.
  std::optional<Reply> Ask(const std::string& request, bool head = false) {
    if (!Send(request)) return std::nullopt;
    return Read(head);
  }

  // Whether the server closes the connection (end of stream or reset) within
  // `timeout_ms`; what arrives meanwhile is kept for Read().
  bool WaitClosed(int64_t timeout_ms) {
    return WaitFor(
        [this] {
          char chunk[4096];
          ssize_t n = recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT);
          if (n > 0) buffer_.append(chunk, static_cast<size_t>(n));
          return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
        },
        timeout_ms);
  }
  const std::string& unread() const { return buffer_; }

 private:
  bool Fill() {
    char chunk[65536];
    ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  std::string buffer_;
};

std::string Get(const std::string& target, const std::string& extra_headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n";
}

std::string Post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: test\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

Response Text(std::string body) {
  Response response;
  response.body = std::move(body);
  return response;
}

// A started server with a few routes; the test adds its own before Start().
class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServer::Options options = {}) {
    server_ = std::make_unique<HttpServer>(options);
    server_->Handle("GET", "/hello", [](const Request& r) {
      auto it = r.query.find("name");
      return Text("hello " + (it == r.query.end() ? std::string("world") : it->second));
    });
    server_->Handle("POST", "/echo", [](const Request& r) { return Text(r.method + ":" + r.body); });
    server_->Handle("GET", "/throw", [](const Request&) -> Response { throw std::runtime_error("handler broke"); });
    server_->Handle("GET", "/big", [](const Request&) { return Text(std::string(8 << 20, 'x')); });
    for (auto& [method, path, handler] : extra_routes_) server_->Handle(method, path, handler);
    absl::Status status = server_->Start();
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_GT(server_->port(), 0);
  }
  int port() const { return server_->port(); }

  std::vector<std::tuple<std::string, std::string, Handler>> extra_routes_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, GetHeadAndPostOnOneKeptAliveConnection) {
  StartServer();
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(port()));
  Client client(port());
  auto get = client.Ask(Get("/hello?name=ann"));
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "hello ann");
  EXPECT_EQ(get->Get("content-length"), "9");
  EXPECT_EQ(get->Get("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(get->Get("server"), "manta");
  EXPECT_EQ(get->Get("cache-control"), "no-store");
  auto head = client.Ask("HEAD /hello?name=ann HTTP/1.1\r\nHost: test\r\n\r\n", /*head=*/true);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->Get("content-length"), "9");
  EXPECT_EQ(head->body, "");
  // The HEAD response carried no body: the next response parses cleanly.
  auto post = client.Ask(Post("/echo", "payload"));
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->status, 200);
  EXPECT_EQ(post->body, "POST:payload");
  // Two requests in one write: two responses, in order.
  ASSERT_TRUE(client.Send(Get("/hello?name=one") + Get("/hello?name=two")));
  auto one = client.Read();
  auto two = client.Read();
  ASSERT_TRUE(one.has_value() && two.has_value());
  EXPECT_EQ(one->body, "hello one");
  EXPECT_EQ(two->body, "hello two");
}

TEST_F(HttpServerTest, Http10ClosesUnlessKeptAlive) {
  StartServer();
  Client plain(port());
  auto reply = plain.Ask("GET /hello HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "hello world");
  EXPECT_TRUE(plain.WaitClosed(5000));
  Client kept(port());
  auto first = kept.Ask("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->Get("connection"), "keep-alive");
  auto second = kept.Ask("GET /hello?name=again HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->body, "hello again");
  // HTTP/1.1 with Connection: close is answered, then closed.
  Client closing(port());
  auto last = closing.Ask(Get("/hello", "Connection: close\r\n"));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->Get("connection"), "close");
  EXPECT_TRUE(closing.WaitClosed(5000));
}

TEST_F(HttpServerTest, QueryAndPathAreDecoded) {
  std::string seen;
  extra_routes_.emplace_back("GET", "/files/", [&seen](const Request& r) {
    seen = r.path;
    for (const auto& [key, value] : r.query) seen += "|" + key + "=" + value;
    return Text("ok");
  });
  StartServer();
  Client client(port());
  auto reply = client.Ask(Get("/files/a%2Fb%20c?a=1&b=x%20y&c=p+q&a=2&empty=&flag&&%3D=%26"));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(seen, "/files/a/b c|==&|a=2|b=x y|c=p q|empty=|flag=");
  for (const char* bad : {"/files/x?a=%zz", "/files/x?a=%4", "/files/%", "/files/%00"}) {
    auto error = client.Ask(Get(bad));
    ASSERT_TRUE(error.has_value()) << bad;
    EXPECT_EQ(error->status, 400) << bad;
  }
  // The framing was fine, so the connection still serves.
  auto after = client.Ask(Get("/hello"));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpServerTest, NotFoundMethodNotAllowedAndPrefixRoutes) {
  auto named = [](std::string name) { return [name](const Request& r) { return Text(name + " " + r.path); }; };
  extra_routes_.emplace_back("GET", "/api/", named("api"));
  extra_routes_.emplace_back("GET", "/api/tasks/", named("tasks"));
  extra_routes_.emplace_back("GET", "/api/tasks", named("exact"));
  extra_routes_.emplace_back("DELETE", "/api/tasks", named("delete"));
  StartServer();
  Client client(port());
  auto body_of = [&client](const std::string& request) {
    auto reply = client.Ask(request);
    return reply ? std::to_string(reply->status) + " " + reply->body : std::string("no reply");
  };
  EXPECT_EQ(body_of(Get("/api/x/y")), "200 api /api/x/y");
  EXPECT_EQ(body_of(Get("/api/")), "200 api /api/");
  EXPECT_EQ(body_of(Get("/api/tasks/12")), "200 tasks /api/tasks/12");
  EXPECT_EQ(body_of(Get("/api/tasks")), "200 exact /api/tasks");
  EXPECT_EQ(body_of("DELETE /api/tasks HTTP/1.1\r\nHost: t\r\n\r\n"), "200 delete /api/tasks");
  EXPECT_EQ(body_of(Get("/apix")).substr(0, 3), "404");
  EXPECT_EQ(body_of(Get("/api")).substr(0, 3), "404");
  auto not_allowed = client.Ask(Post("/hello", "x"));
  ASSERT_TRUE(not_allowed.has_value());
  EXPECT_EQ(not_allowed->status, 405);
  EXPECT_EQ(not_allowed->Get("allow"), "GET, HEAD");
  auto put = client.Ask("PUT /api/tasks HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(put.has_value());
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->Get("allow"), "DELETE, GET, HEAD");
}

TEST_F(HttpServerTest, HeadersCookiesAndResponseHeaders) {
  extra_routes_.emplace_back("GET", "/me", [](const Request& r) {
    Response response = Text(r.Cookie("session") + "|" + r.Cookie("b") + "|" + r.Cookie("none") + "|" +
                             r.Header("x-custom") + "|" + r.Header("X-CUSTOM") + "|" + r.Header("absent"));
    response.headers.emplace_back("Set-Cookie", "session=new; HttpOnly");
    response.headers.emplace_back("Set-Cookie", "other=1");
    response.headers.emplace_back("Cache-Control", "max-age=5");
    response.headers.emplace_back("X-Remote", r.remote_address);
    response.headers.emplace_back("X-Evil", "a\r\nInjected: yes");
    response.headers.emplace_back("Content-Length", "999");
    response.content_type = "application/json";
    return response;
  });
  StartServer();
  Client client(port());
  auto reply = client.Ask(Get("/me", "Cookie: a=1; session=\"abc\"\r\nX-Custom: yes\r\nCookie: b=2\r\n"));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "abc|2||yes|yes|");
  EXPECT_EQ(reply->Count("set-cookie"), 2);
  EXPECT_EQ(reply->Get("cache-control"), "max-age=5");
  EXPECT_EQ(reply->Count("cache-control"), 1);
  EXPECT_EQ(reply->Get("content-type"), "application/json");
  EXPECT_EQ(reply->Get("content-length"), std::to_string(reply->body.size()));
  EXPECT_EQ(reply->Get("x-remote").rfind("127.0.0.1:", 0), 0u) << reply->Get("x-remote");
  EXPECT_EQ(reply->Count("x-evil"), 0);
  EXPECT_EQ(reply->Count("injected"), 0);
}

TEST_F(HttpServerTest, NoContentHasNoBodyAndBadStatusIs500) {
  extra_routes_.emplace_back("DELETE", "/thing", [](const Request&) {
    Response response;
    response.status = 204;
    response.body = "dropped";
    return response;
  });
  extra_routes_.emplace_back("GET", "/weird", [](const Request&) {
    Response response;
    response.status = 42;
    return response;
  });
  StartServer();
  Client client(port());
  auto deleted = client.Ask("DELETE /thing HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(deleted.has_value());
  EXPECT_EQ(deleted->status, 204);
  EXPECT_EQ(deleted->Count("content-length"), 0);
  auto weird = client.Ask(Get("/weird"));
  ASSERT_TRUE(weird.has_value());
  EXPECT_EQ(weird->status, 500);
}

TEST_F(HttpServerTest, HandlerExceptionIs500AndTheServerGoesOn) {
  StartServer();
  Client client(port());
  auto broken = client.Ask(Get("/throw"));
  ASSERT_TRUE(broken.has_value());
  EXPECT_EQ(broken->status, 500);
  EXPECT_NE(broken->body.find("handler broke"), std::string::npos);
  auto same = client.Ask(Get("/hello"));
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->status, 200);
  Client other(port());
  auto fresh = other.Ask(Get("/hello"));
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->status, 200);
}

TEST_F(HttpServerTest, GarbageIs400AndClosed) {
  StartServer();
  for (const std::string& garbage :
       {std::string("GARBAGE\r\n\r\n"), std::string("\x01\x02\x03 / HTTP/1.1\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), std::string("GET / HTTP/1.1\r\nBad Header\r\n\r\n"),
        std::string("POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n")}) {
    Client client(port());
    auto reply = client.Ask(garbage);
    ASSERT_TRUE(reply.has_value()) << garbage;
    EXPECT_EQ(reply->status, 400) << garbage;
    EXPECT_EQ(reply->Get("connection"), "close");
    EXPECT_TRUE(client.WaitClosed(5000)) << garbage;
  }
}

TEST_F(HttpServerTest, LimitsOnHeaderAndBody) {
  HttpServer::Options options;
  options.max_header_bytes = 4096;
  options.max_body_bytes = 1000;
  StartServer(options);
  {
    Client client(port());
    auto reply = client.Ask(Get("/hello", "X-Big: " + std::string(8000, 'a') + "\r\n"));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 431);
    EXPECT_TRUE(client.WaitClosed(5000));
  }
  {
    // Declared too long: refused before the body is sent.
    Client client(port());
    auto reply = client.Ask("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n");
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 413);
    EXPECT_TRUE(client.WaitClosed(5000));
  }
  {
    // Sent whole: the peer still gets its 413 (the server drains what it sent).
    Client client(port());
    auto reply = client.Ask(Post("/echo", std::string(300000, 'b')));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 413);
  }
  {
    // Chunked: refused once the chunks pass the limit.
    Client client(port());
    std::string chunk = "258\r\n" + std::string(600, 'c') + "\r\n";
    auto reply = client.Ask("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + chunk);
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 413);
  }
  Client client(port());
  std::string body(1000, 'd');
  auto at_limit = client.Ask(Post("/echo", body));
  ASSERT_TRUE(at_limit.has_value());
  EXPECT_EQ(at_limit->body, "POST:" + body);
  auto chunked = client.Ask("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  ASSERT_TRUE(chunked.has_value());
  EXPECT_EQ(chunked->body, "POST:abc");
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimResponse) {
  StartServer();
  Client client(port());
  auto interim = client.Ask("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  auto reply = client.Ask("hello");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "POST:hello");
}

TEST_F(HttpServerTest, ConnectionCap) {
  HttpServer::Options options;
  options.max_connections = 2;
  StartServer(options);
  auto first = std::make_unique<Client>(port());
  Client second(port());
  ASSERT_TRUE(first->Ask(Get("/hello")).has_value());
  ASSERT_TRUE(second.Ask(Get("/hello")).has_value());
  {
    Client third(port());
    third.Send(Get("/hello"));
    EXPECT_TRUE(third.WaitClosed(5000));
    // The refusal is a 503, unless the reset that closing an unread request causes
    // destroyed it first.
    if (!third.unread().empty()) {
      EXPECT_EQ(third.unread().rfind("HTTP/1.1 503", 0), 0u) << third.unread();
    }
  }
  first.reset();
  // Once the server has seen the first connection go, a new one is served.
  EXPECT_TRUE(WaitFor(
      [this] {
        Client again(port());
        auto reply = again.Ask(Get("/hello"));
        return reply.has_value() && reply->status == 200;
      },
      10000));
  EXPECT_TRUE(second.Ask(Get("/hello")).has_value());
}

TEST_F(HttpServerTest, IdleConnectionsAreClosed) {
  HttpServer::Options options;
  options.idle_timeout_ms = 300;
  StartServer(options);
  Client silent(port());
  Client half(port());
  ASSERT_TRUE(half.Send("GET /hello HTTP/1.1\r\nHost: t\r\n"));
  Client after_request(port());
  ASSERT_TRUE(after_request.Ask(Get("/hello")).has_value());
  EXPECT_TRUE(silent.WaitClosed(10000));
  EXPECT_TRUE(half.WaitClosed(10000));
  EXPECT_TRUE(after_request.WaitClosed(10000));
}

TEST_F(HttpServerTest, PeersLeavingMidRequestOrMidResponseDoNotHurt) {
  StartServer();
  for (int i = 0; i < 5; ++i) {
    Client leaves_mid_response(port());
    ASSERT_TRUE(leaves_mid_response.Send(Get("/big")));
    leaves_mid_response.Close();
    Client leaves_mid_body(port());
    ASSERT_TRUE(leaves_mid_body.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly some"));
    leaves_mid_body.Close();
    Client leaves_mid_header(port());
    ASSERT_TRUE(leaves_mid_header.Send("GET /hel"));
    leaves_mid_header.Close();
  }
  // A client that reads part of a large response and then leaves.
  Client partial(port());
  ASSERT_TRUE(partial.Send(Get("/big")));
  ASSERT_TRUE(WaitFor([&partial] { return !partial.WaitClosed(0) && partial.unread().size() > 1000; }, 5000));
  partial.Close();
  Client client(port());
  auto reply = client.Ask(Get("/big"));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body.size(), 8u << 20);
}

TEST_F(HttpServerTest, StopClosesOpenConnectionsAndIsIdempotent) {
  StartServer();
  Client half(port());
  ASSERT_TRUE(half.Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
  Client idle(port());
  ASSERT_TRUE(idle.Ask(Get("/hello")).has_value());
  server_->Stop();
  EXPECT_TRUE(half.WaitClosed(5000));
  EXPECT_TRUE(idle.WaitClosed(5000));
  server_->Stop();
  EXPECT_LT(manta::testing::ConnectTcp("127.0.0.1", port()), 0);
  server_.reset();
}

TEST_F(HttpServerTest, PortInUseIsAClearError) {
  StartServer();
  HttpServer::Options options;
  options.port = port();
  HttpServer second(options);
  absl::Status status = second.Start();
  EXPECT_EQ(std::string(status.message()), "cannot listen on 127.0.0.1:" + std::to_string(port()) + ": Address already in use");
  second.Stop();  // never started: a no-op
  EXPECT_EQ(server_->Start().code(), absl::StatusCode::kFailedPrecondition);
  HttpServer never_started(HttpServer::Options{});
}

}  // namespace
}  // namespace manta::http
