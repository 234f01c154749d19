# Writes OUTPUT (a header defining DLOCK_REVISION, the source tree's git revision, "unknown"
# outside a git checkout) when its content would change, so that a build rewrites it only
# after a commit or checkout. Run at every build by src/exe/CMakeLists.txt (cmake -P).
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR revision STREQUAL "")
  set(revision "unknown")
endif()
set(content "#pragma once\n#define DLOCK_REVISION \"${revision}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
endif()
if(NOT previous STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
