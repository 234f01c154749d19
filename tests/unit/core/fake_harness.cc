// The conformance matrix's harness table for fake_store_conformance_test: one backend, "fake",
// whose stores share one in-memory FakeStorage.

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/backend_harness.h"
#include "support/fake_store.h"

namespace dlock::testing {
namespace {

class FakeHarness : public BackendHarness {
 public:
  BackendPtr make_backend(const TtlLimits& limits) override {
    FakeStoreOptions options;
    options.limits = limits;
    return std::make_unique<FakeStore>(options, storage_);
  }
  void begin_outage() override { storage_->begin_outage(); }
  void end_outage() override { storage_->end_outage(); }
  void raw_delete(std::string_view key) override { storage_->raw_delete(key); }

 private:
  std::shared_ptr<FakeStorage> storage_ = std::make_shared<FakeStorage>();
};

}  // namespace

std::vector<std::string> conformance_backends() { return {"fake"}; }

BackendHarness& harness_for(std::string_view backend) {
  if (backend != "fake") throw std::invalid_argument("no harness for " + std::string(backend));
  static FakeHarness harness;
  return harness;
}

}  // namespace dlock::testing
