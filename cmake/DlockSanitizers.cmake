# -DDLOCK_SANITIZE=address,undefined builds everything with ASan+UBSan; thread for TSan.
if(DLOCK_SANITIZE)
  set(_flags "-fsanitize=${DLOCK_SANITIZE}" -fno-omit-frame-pointer)
  if(DLOCK_SANITIZE MATCHES "thread")
    # Asio's atomic_thread_fence use draws a -Wtsan warning, which -Werror would turn fatal.
    list(APPEND _flags -Wno-tsan)
  endif()
  if(DLOCK_SANITIZE MATCHES "address" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12's -Wmaybe-uninitialized misfires under ASan's instrumentation on Boost.Beast's
    # basic_parser::content_length (a boost::optional returned as none); -Werror made it fatal.
    # The normal build keeps the warning.
    list(APPEND _flags -Wno-maybe-uninitialized)
  endif()
  if(DLOCK_SANITIZE MATCHES "undefined")
    list(APPEND _flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options(${_flags})
  add_link_options("-fsanitize=${DLOCK_SANITIZE}")
  message(STATUS "dlock: building with sanitizers: ${DLOCK_SANITIZE}")
endif()

# dlock_unsanitized(target...): targets that only tests outside the sanitizer pass use (label
# nosanitize). A sanitizer build leaves them out of `all`, so it compiles only what it runs;
# `ninja TARGET` still builds one on demand.
function(dlock_unsanitized)
  if(DLOCK_SANITIZE)
    set_target_properties(${ARGN} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
endfunction()
