# Warnings are errors for the project's own code; applied per target by dlock_target_defaults.
function(dlock_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wpedantic)
endfunction()
