// The Beast transport against a real socket: keep-alive, stale connections, refused
// connections and timeouts.

#include <gtest/gtest.h>

#include <thread>

#include "dlock/client.h"
#include "fake_server.h"
#include "test_options.h"

namespace dlock::client {
namespace {

using std::chrono::milliseconds;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

const char* kFreeLock = R"({"error":{"code":"lock_not_found","message":"free"}})";

ClientOptions options_for(const std::string& url) { return testing::fast_options(url); }

TEST(BeastTransport, KeepAliveReusesOneConnection) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  Client client(options_for(server.url()));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(client.get("k").has_value());
  EXPECT_EQ(server.connections_accepted(), 1);
  EXPECT_EQ(server.requests().at(0).target, "/v1/locks/k");
}

TEST(BeastTransport, ConnectionClosedByTheServerIsReplacedTransparently) {
  FakeServer server([](const FakeRequest&) {
    FakeResponse response{404, kFreeLock};
    response.close_silently = true;  // like an idle timeout between two requests
    return response;
  });
  Client client(options_for(server.url()));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(client.get("k").has_value());
  EXPECT_EQ(server.requests().size(), 3U);
  EXPECT_EQ(server.connections_accepted(), 3);
}

TEST(BeastTransport, RefusedConnectionIsUnavailableNeverHeld) {
  std::string url;
  {
    FakeServer gone([](const FakeRequest&) { return FakeResponse{}; });
    url = gone.url();
  }
  ClientOptions options = options_for(url);
  options.retry_budget = milliseconds(200);
  Client client(options);
  EXPECT_THROW(client.acquire("k", "s", milliseconds(0), milliseconds(0)), UnavailableError);
  try {
    client.get("k");
    FAIL();
  } catch (const UnknownOutcomeError&) {
    FAIL() << "a refused connection never carried the request";
  } catch (const UnavailableError& error) {
    EXPECT_NE(std::string(error.what()).find("gave up after"), std::string::npos);
  }
}

TEST(BeastTransport, SlowServerTimesOutAsUnknownOutcome) {
  FakeServer server([](const FakeRequest&) {
    FakeResponse response{404, kFreeLock};
    response.delay = milliseconds(3000);
    return response;
  });
  ClientOptions options = options_for(server.url());
  options.request_timeout = milliseconds(100);
  options.retry_budget = milliseconds(250);
  Client client(options);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(client.get("k"), UnknownOutcomeError);
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(2000));
}

TEST(BeastTransport, OneClientServesManyThreads) {
  FakeServer server([](const FakeRequest& request) {
    return FakeResponse{200, R"({"key":"k","fencing_token":1,"owner":"o","session_id":"s",)"
                             R"("acquired_at":"2030-01-01T00:00:00Z",)"
                             R"("expires_at":"2030-01-01T00:00:30.5+01:00","echo":")" +
                                 request.target + "\"}"};
  });
  Client client(options_for(server.url()));
  std::vector<std::jthread> threads;
  std::atomic<int> answered{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&client, &answered, t] {
      for (int i = 0; i < 20; ++i) {
        auto info = client.get("key-" + std::to_string(t));
        if (info && info->fencing_token == 1) ++answered;
      }
    });
  }
  threads.clear();
  EXPECT_EQ(answered.load(), 160);
  EXPECT_LE(server.connections_accepted(), 16);
}

TEST(BeastTransport, ServerPathPrefixIsKept) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{404, kFreeLock}; });
  Client client(options_for(server.url() + "/dlock/"));
  EXPECT_FALSE(client.get("a/b").has_value());
  EXPECT_EQ(server.requests().at(0).target, "/dlock/v1/locks/a%2Fb");
}

}  // namespace
}  // namespace dlock::client
