// A program outside the dlock tree, built against an installed prefix (CMake and pkg-config):
// it acquires a lock, releases it, and shows the release took effect (a second session gets
// the key at once, with a greater fencing token).
#include <dlock/client.h>
#include <dlock/errors.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SERVER_URL\n", argv[0]);
    return 2;
  }
  try {
    dlock::client::Client client({.server_url = argv[1]});
    dlock::client::Session first(client, {.owner = "install-test-a"});
    auto lock = first.acquire("install-test/key", {.ttl = 10s});
    if (!lock) {
      std::fprintf(stderr, "FAIL: the key is held before anyone took it\n");
      return 1;
    }
    const auto token = lock->token();
    lock->release();
    dlock::client::Session second(client, {.owner = "install-test-b"});
    auto again = second.acquire("install-test/key", {.ttl = 10s});
    if (!again || again->token() <= token) {
      std::fprintf(stderr, "FAIL: the key was not free after release\n");
      return 1;
    }
    std::printf("OK acquired token %llu, released, re-acquired token %llu\n",
                static_cast<unsigned long long>(token),
                static_cast<unsigned long long>(again->token()));
    again->release();
    first.close();
    second.close();
    return 0;
  } catch (const dlock::Error& error) {
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
}
