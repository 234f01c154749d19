#pragma once

// Environments for fault tests that the process itself cannot fake: a wall clock that steps
// (libfaketime preloaded into a child process) and a small file system that fills up (a tmpfs
// mounted for the test). Both need the machine to allow them; `available()` says whether it does
// so that a test can skip with a clear reason instead of failing.

#include <chrono>
#include <string>
#include <vector>

namespace dlock::testing {

// A wall clock offset that a child process follows while it runs: libfaketime reads the offset
// from a file on every time call (FAKETIME_NO_CACHE=1), and CLOCK_MONOTONIC / CLOCK_BOOTTIME are
// left alone (FAKETIME_DONT_FAKE_MONOTONIC=1), which is what an NTP or operator step of the
// system clock looks like to a process.
class SteppedClock {
 public:
  SteppedClock();  // offset 0
  SteppedClock(const SteppedClock&) = delete;
  SteppedClock& operator=(const SteppedClock&) = delete;
  ~SteppedClock();

  // Whether libfaketime is installed (Debian: libfaketime).
  static bool available();
  // "NAME=value" entries for SubprocessOptions::env.
  std::vector<std::string> env() const;
  // Steps the wall clock of every process started with env() to real time + `offset`.
  void set_offset(std::chrono::seconds offset);

 private:
  std::string dir_;
  std::string file_;
};

// A tmpfs of `bytes` mounted on a fresh directory, unmounted on destruction.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(std::size_t bytes);
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;
  ~SmallFilesystem();

  // Whether this process may mount a tmpfs (root, or CAP_SYS_ADMIN, and no seccomp refusal).
  static bool available();
  const std::string& path() const { return path_; }
  // Writes a filler file until the file system is full; returns the bytes written.
  std::size_t fill();
  // Removes the filler: the space returns.
  void free_space();

 private:
  std::string path_;
};

}  // namespace dlock::testing
