#pragma once

// A test fixture: a fake dlockd answering as FakeLockApi unless the test's script answers first,
// a Client with fast options on it, and the requests it received by route.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "dlock/client.h"
#include "fake_lock_api.h"
#include "test_options.h"

namespace dlock::client::testing {

class ScriptedApiTest : public ::testing::Test {
 protected:
  ScriptedApiTest()
      : server_([this](const FakeRequest& request) {
          if (script_) {
            if (auto answer = script_(request); answer.status != 0) return answer;
          }
          return api_.handle(request);
        }),
        client_(fast_options(server_.url())) {}

  // The requests that went to `method` on a target starting with `prefix`.
  std::vector<FakeRequest> sent(const std::string& method, const std::string& prefix) const {
    return server_.requests_to(method, prefix);
  }

  FakeLockApi api_;
  // Answers first when it returns a status other than 0; FakeLockApi otherwise.
  std::function<FakeResponse(const FakeRequest&)> script_;
  FakeServer server_;
  Client client_;
};

}  // namespace dlock::client::testing
