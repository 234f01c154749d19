// A first look at the embedded store: opens a session, acquires, re-acquires and releases a
// lock, and prints the fencing tokens. Run it twice: the tokens keep growing across runs.
#include <cstdio>
#include <exception>

#include "store/factory.h"

int main(int argc, char** argv) {
  try {
    dlock::store::StoreConfig config;
    if (argc > 1) config.sqlite_path = argv[1];
    auto backend = dlock::store::make_backend(config);
    const auto session = backend->open_session("demo", std::chrono::seconds(30));
    std::printf("store %s at %s, session %s\n", std::string(backend->backend_id()).c_str(),
                config.sqlite_path.c_str(), session.session_id.c_str());
    const auto first = backend->try_grant("default/demo", "demo", session.session_id,
                                          dlock::GrantRequest::exclusive(std::chrono::seconds(10)));
    std::printf("acquire    default/demo -> fencing token %llu\n",
                static_cast<unsigned long long>(first->fencing_token));
    const auto again = backend->try_grant("default/demo", "demo", session.session_id,
                                          dlock::GrantRequest::exclusive(std::chrono::seconds(10)));
    std::printf("re-acquire default/demo -> fencing token %llu (strictly greater)\n",
                static_cast<unsigned long long>(again->fencing_token));
    const bool released = backend->delete_if_owner(again->ref());
    std::printf("release    default/demo -> %s\n", released ? "released" : "not held");
    backend->close_session(session.session_id);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock-demo: %s\n", error.what());
    return 1;
  }
}
