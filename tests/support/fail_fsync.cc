// Preloaded into dlockd by the storage-fault scenario (clock_disk_fault_test): while the file
// named by DLOCK_FAIL_FSYNC_WHEN exists, fsync and fdatasync fail with EIO, as they do when the
// device reports a write error; otherwise they are the system calls.

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

bool failing() {
  const char* trigger = std::getenv("DLOCK_FAIL_FSYNC_WHEN");
  return trigger != nullptr && ::access(trigger, F_OK) == 0;
}

}  // namespace

extern "C" int fsync(int fd) {
  if (failing()) {
    errno = EIO;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

extern "C" int fdatasync(int fd) {
  if (failing()) {
    errno = EIO;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fdatasync, fd));
}
