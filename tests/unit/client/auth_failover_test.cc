// Bearer tokens (contract C6) and failover between several servers, against real sockets:
// every /v1 request carries the token, 401/403 become their own errors, and a call moves to
// the next server on a refused connection or a 503 — but never repeats an unsafe call whose
// outcome is unknown.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dlock/client.h"
#include "fake_server.h"
#include "test_options.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;
using testing::error_body;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

const char* kFreeLock = R"({"error":{"code":"lock_not_found","message":"free"}})";
const char* kToken = "dlk_secret-Token_0123456789abcdefABCDEF~+/";
const char* kSession =
    R"({"session_id":"s1","owner":"o","ttl_ms":30000,"expires_at":"2030-01-01T00:00:00Z"})";
const char* kGrant = R"({"key":"k","fencing_token":7,"owner":"o","session_id":"s1","ttl_ms":30000,)"
                     R"("expires_at":"2030-01-01T00:00:00Z"})";

ClientOptions options_for(const std::string& url) { return testing::fast_options(url); }

// Unsets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string temp_file(const std::string& content) {
  static int counter = 0;
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("dlock-token-" + std::to_string(getpid()) + "-" + std::to_string(++counter)))
          .string();
  std::ofstream(path) << content;
  return path;
}

TEST(BearerToken, SentOnEveryRequest) {
  ScopedEnv no_env("DLOCK_TOKEN", nullptr);
  FakeServer server([](const FakeRequest& request) {
    if (request.method == "POST" && request.target == "/v1/sessions")
      return FakeResponse{201, kSession};
    if (request.target.find("/acquire") != std::string::npos) return FakeResponse{200, kGrant};
    if (request.method == "DELETE") return FakeResponse{204, ""};
    return FakeResponse{404, kFreeLock};
  });
  ClientOptions options = options_for(server.url());
  options.token = kToken;
  Client client(options);
  const SessionInfo session = client.open_session("o", milliseconds(0));
  ASSERT_TRUE(client.acquire("k", session.session_id, milliseconds(0), milliseconds(0)));
  EXPECT_FALSE(client.get("k").has_value());
  client.release("k", session.session_id, 7);
  client.close_session(session.session_id);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 5U);
  for (const FakeRequest& request : requests) {
    EXPECT_EQ(request.authorization, std::string("Bearer ") + kToken) << request.target;
  }
}

TEST(BearerToken, FromFileThenEnvironmentInThatOrder) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  const std::string file = temp_file("from-file\n");
  {
    ScopedEnv env("DLOCK_TOKEN", "from-env");
    ClientOptions options = options_for(server.url());
    options.token_file = file;
    Client(options).get("k");
    Client(options_for(server.url())).get("k");
  }
  {
    ScopedEnv env("DLOCK_TOKEN", nullptr);
    ScopedEnv env_file("DLOCK_TOKEN_FILE", file.c_str());
    Client(options_for(server.url())).get("k");
  }
  {
    ScopedEnv env("DLOCK_TOKEN", nullptr);
    ScopedEnv env_file("DLOCK_TOKEN_FILE", nullptr);
    Client(options_for(server.url())).get("k");
  }
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4U);
  EXPECT_EQ(requests[0].authorization, "Bearer from-file");
  EXPECT_EQ(requests[1].authorization, "Bearer from-env");
  EXPECT_EQ(requests[2].authorization, "Bearer from-file");
  EXPECT_EQ(requests[3].authorization, "");
  std::filesystem::remove(file);
}

TEST(BearerToken, BadTokensAreRefusedWithoutShowingThem) {
  ScopedEnv no_env("DLOCK_TOKEN", nullptr);
  for (const char* bad : {"has space-secret", "line\r\nX-Injected: secret", "secret=x"}) {
    ClientOptions options = options_for("http://127.0.0.1:1");
    options.token = bad;
    try {
      Client client(options);
      ADD_FAILURE() << "accepted a bad token";
    } catch (const InvalidArgumentError& error) {
      EXPECT_EQ(error.field(), "token");
      EXPECT_EQ(std::string(error.what()).find("secret"), std::string::npos) << error.what();
    }
  }
  ClientOptions options = options_for("http://127.0.0.1:1");
  options.token_file = "/nonexistent/dlock-token";
  try {
    Client client(options);
    ADD_FAILURE() << "accepted a missing token file";
  } catch (const InvalidArgumentError& error) {
    EXPECT_EQ(error.field(), "token_file");
    EXPECT_NE(std::string(error.what()).find("/nonexistent/dlock-token"), std::string::npos);
  }
}

TEST(BearerToken, UnauthenticatedAndPermissionDeniedAreDistinctAndSecretFree) {
  FakeServer server([](const FakeRequest& request) {
    if (request.method == "GET") {
      return FakeResponse{
          401, error_body("unauthenticated", "unknown token"), {{"WWW-Authenticate", "Bearer"}}};
    }
    return FakeResponse{403, error_body("permission_denied", "no lock on ns")};
  });
  ClientOptions options = options_for(server.url());
  options.token = kToken;
  Client client(options);
  try {
    client.get("k");
    ADD_FAILURE() << "401 not thrown";
  } catch (const UnauthenticatedError& error) {
    EXPECT_FALSE(error.retryable());
    EXPECT_EQ(error.code(), ErrorCode::kUnauthenticated);
    EXPECT_EQ(std::string(error.what()).find(kToken), std::string::npos);
  }
  try {
    client.acquire("k", "s", milliseconds(0), milliseconds(0));
    ADD_FAILURE() << "403 not thrown";
  } catch (const PermissionDeniedError& error) {
    EXPECT_EQ(error.code(), ErrorCode::kPermissionDenied);
    EXPECT_EQ(std::string(error.what()).find(kToken), std::string::npos);
  }
  // Neither is retried: one request each.
  EXPECT_EQ(server.requests().size(), 2U);
}

TEST(BearerToken, AdminTokenWinsForRevokeOnly) {
  ScopedEnv no_env("DLOCK_ADMIN_TOKEN", nullptr);
  FakeServer server([](const FakeRequest& request) {
    if (request.target.find("/revoke") != std::string::npos) {
      return FakeResponse{200, R"({"revoked":false})"};
    }
    return FakeResponse{404, kFreeLock};
  });
  ClientOptions options = options_for(server.url());
  options.token = "user-token";
  options.admin_token = "admin-token";
  Client client(options);
  client.revoke("k");
  client.get("k");
  options.admin_token.clear();
  Client(options).revoke("k");
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3U);
  EXPECT_EQ(requests[0].authorization, "Bearer admin-token");
  EXPECT_EQ(requests[1].authorization, "Bearer user-token");
  EXPECT_EQ(requests[2].authorization, "Bearer user-token");
}

std::string closed_port_url() {
  FakeServer gone([](const FakeRequest&) { return FakeResponse{}; });
  return gone.url();
}

TEST(Failover, RefusedConnectionMovesToTheNextServerAndStaysThere) {
  FakeServer second([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  ClientOptions options = options_for(closed_port_url() + " , " + second.url());
  options.backoff_initial = milliseconds(1000);  // failover must not wait for a backoff
  Client client(options);
  ASSERT_EQ(client.servers().size(), 2U);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(client.get("k").has_value());
  EXPECT_FALSE(client.get("k").has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(900));
  EXPECT_EQ(second.requests().size(), 2U);
}

TEST(Failover, A503MovesToTheNextServer) {
  FakeServer first([](const FakeRequest&) {
    return FakeResponse{503, error_body("unavailable", "shutting down"), {{"Retry-After", "1"}}};
  });
  FakeServer second([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  ClientOptions options = options_for("");
  options.servers = {first.url(), second.url()};
  Client client(options);
  EXPECT_EQ(client.server_url(), first.url());
  EXPECT_FALSE(client.get("k").has_value());
  EXPECT_EQ(first.requests().size(), 1U);
  EXPECT_EQ(second.requests().size(), 1U);
}

TEST(Failover, EnvironmentListIsUsed) {
  FakeServer second([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  const std::string list = closed_port_url() + "," + second.url();
  ScopedEnv env("DLOCK_SERVER", list.c_str());
  ClientOptions options = options_for("");
  Client client(options);
  EXPECT_EQ(client.servers().size(), 2U);
  EXPECT_FALSE(client.get("k").has_value());
}

TEST(Failover, AllServersDownIsUnavailable) {
  ClientOptions options = options_for(closed_port_url() + "," + closed_port_url());
  options.retry_budget = milliseconds(300);
  Client client(options);
  EXPECT_THROW(client.get("k"), UnavailableError);
}

// The first server takes the request and never answers (a server dying mid-request).
FakeResponse never_answers(const FakeRequest&) {
  FakeResponse response{503, error_body("unavailable", "late")};
  response.delay = milliseconds(3000);
  return response;
}

TEST(Failover, UnsafeCallWithUnknownOutcomeIsNotRepeatedAnywhere) {
  FakeServer first(never_answers);
  FakeServer second([](const FakeRequest&) { return FakeResponse{201, kSession}; });
  ClientOptions options = options_for(first.url() + "," + second.url());
  options.request_timeout = milliseconds(300);
  Client client(options);
  // Opening a session twice would leave a second session behind.
  EXPECT_THROW(client.open_session("o", milliseconds(0)), UnknownOutcomeError);
  // Revoking twice could remove a grant made after the first revoke.
  EXPECT_THROW(client.revoke("k"), UnknownOutcomeError);
  EXPECT_EQ(first.requests().size(), 2U);
  EXPECT_EQ(second.requests().size(), 0U);
}

TEST(Failover, SafeCallWithUnknownOutcomeMovesOn) {
  FakeServer first(never_answers);
  FakeServer second([](const FakeRequest&) { return FakeResponse{200, kGrant}; });
  ClientOptions options = options_for(first.url() + "," + second.url());
  options.request_timeout = milliseconds(300);
  Client client(options);
  // Acquire is re-entrant for the same session (C3): repeating it mints a greater token.
  const auto handle = client.acquire("k", "s1", milliseconds(0), milliseconds(0));
  ASSERT_TRUE(handle.has_value());
  EXPECT_EQ(handle->fencing_token, 7U);
  EXPECT_EQ(first.requests().size(), 1U);
  EXPECT_EQ(second.requests().size(), 1U);
}

}  // namespace
}  // namespace dlock::client
