// The backend of one run of the console's browser test (tests/console/console_test.mjs): a real
// PostgreSQL or etcd from the test fixtures (tests/support/dlockd_backends.h), or a SQLite
// directory, kept up while the test runs.
//
//   dlock_console_backend sqlite|pg|etcd
//
// Prints one JSON line, the backend options of each dlockd the test starts ("plain": with the
// admin routes, "auth": with a tokens file; pg gives each a database of its own, etcd one
// member for both, sqlite a file each):
//
//   {"backend": "pg", "dlockd_args": {"plain": ["--lock-backend", "pg", "--pg-url", "..."],
//                                     "auth": [...]}}
//
// then waits for EOF (or a line "quit") on stdin and tears everything down, so a test that
// dies takes its backend with it.

#include <signal.h>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <filesystem>
#include <iostream>
#include <string>

#include "support/dlockd_backends.h"
#include "support/subprocess.h"

namespace dlock::testing {
namespace {

boost::json::array backend_args(const std::string& backend, const std::string& name,
                                const std::string& dir) {
  const DlockdOptions options = dlockd_options(backend, "dlock_console_" + name);
  boost::json::array args = {"--lock-backend", backend};
  if (backend == "sqlite") {
    args.insert(args.end(), {"--sqlite-path", dir + "/" + name + ".db"});
  } else if (backend == "pg") {
    args.insert(args.end(), {"--pg-url", options.pg_url});
  } else {
    args.insert(args.end(), {"--etcd-endpoints", options.etcd_endpoints});
  }
  return args;
}

int run(const std::string& backend) {
  bool known = false;
  for (const std::string& name : dlockd_backends()) known = known || name == backend;
  if (!known) {
    std::cerr << "dlock_console_backend: backend '" << backend << "' is not built in\n";
    return 64;
  }
  signal(SIGPIPE, SIG_IGN);  // a test that died closed the pipe: still tear down
  const std::string dir = make_temp_dir("console");
  const boost::json::object hello = {{"backend", backend},
                                     {"dlockd_args",
                                      {{"plain", backend_args(backend, "plain", dir)},
                                       {"auth", backend_args(backend, "auth", dir)}}}};
  std::cout << boost::json::serialize(hello) << std::endl;
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;  // the static PostgreSQL / etcd stop on exit
}

}  // namespace
}  // namespace dlock::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dlock_console_backend sqlite|pg|etcd (tests/console/console_test.mjs)\n";
    return 64;
  }
  try {
    return dlock::testing::run(argv[1]);
  } catch (const std::exception& error) {
    std::cerr << "dlock_console_backend: " << error.what() << "\n";
    return 1;
  }
}
