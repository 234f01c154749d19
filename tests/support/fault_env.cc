#include "support/fault_env.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "support/subprocess.h"

namespace dlock::testing {
namespace {

// Debian's path; the multi-threaded variant, since dlockd and the executors are threaded.
constexpr const char* kFaketimeLibrary = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

}  // namespace

SteppedClock::SteppedClock() : dir_(make_temp_dir("dlock-faketime")), file_(dir_ + "/offset") {
  set_offset(std::chrono::seconds(0));
}

SteppedClock::~SteppedClock() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool SteppedClock::available() { return std::filesystem::exists(kFaketimeLibrary); }

std::vector<std::string> SteppedClock::env() const {
  return {std::string("LD_PRELOAD=") + kFaketimeLibrary, "FAKETIME_TIMESTAMP_FILE=" + file_,
          "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1", "DONT_FAKE_MONOTONIC=1",
          // A sanitizer build would refuse a preload listed before its runtime.
          "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"};
}

void SteppedClock::set_offset(std::chrono::seconds offset) {
  // Written to a new file and renamed, so libfaketime never reads half a line.
  const std::string next = file_ + ".next";
  {
    std::ofstream out(next, std::ios::trunc);
    out << (offset.count() >= 0 ? "+" : "") << offset.count() << "\n";
  }
  std::filesystem::rename(next, file_);
}

SmallFilesystem::SmallFilesystem(std::size_t bytes) : path_(make_temp_dir("dlock-smallfs")) {
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
  if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    const int error = errno;
    std::filesystem::remove(path_);
    throw std::runtime_error("mount tmpfs: " + std::string(std::strerror(error)));
  }
}

SmallFilesystem::~SmallFilesystem() {
  ::umount2(path_.c_str(), MNT_DETACH);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

bool SmallFilesystem::available() {
  try {
    SmallFilesystem probe(64 * 1024);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::size_t SmallFilesystem::fill() {
  const std::string filler = path_ + "/filler";
  const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) throw std::runtime_error("open filler: " + std::string(std::strerror(errno)));
  std::size_t written = 0;
  char block[4096];
  std::memset(block, 'x', sizeof block);
  for (std::size_t chunk = sizeof block; chunk > 0;) {
    const ssize_t n = ::write(fd, block, chunk);
    if (n > 0) {
      written += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == ENOSPC) {
      chunk /= 2;  // down to single bytes: the file system is full to the last byte
    } else if (n < 0 && errno != EINTR) {
      break;
    }
  }
  ::close(fd);
  return written;
}

void SmallFilesystem::free_space() { std::filesystem::remove(path_ + "/filler"); }

}  // namespace dlock::testing
