# Every public header must compile on its own (self-contained) and include nothing outside the
# C++ standard library and dlock/ itself (checked by scripts/check-public-headers as a test).
function(dlock_check_public_headers)
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/dlock/*.h)
  set(sources "")
  foreach(header ${headers})
    get_filename_component(name ${header} NAME_WE)
    set(source ${CMAKE_CURRENT_BINARY_DIR}/header_check/${name}.cc)
    file(CONFIGURE OUTPUT ${source} CONTENT "#include \"dlock/${name}.h\"\n")
    list(APPEND sources ${source})
  endforeach()
  add_library(dlock_header_check OBJECT ${sources})
  # Only the public include directory: a header relying on anything else fails to compile.
  target_include_directories(dlock_header_check PRIVATE ${PROJECT_SOURCE_DIR}/include)
  dlock_target_defaults(dlock_header_check)
endfunction()
