# dlock_embed_sql(OUT_VAR NAMESPACE ns FILES a.sql b.sql): generates a .cc that defines
#   const std::vector<std::pair<int, std::string_view>>& ns::migrations();
# from versioned files named NNN_description.sql, in version order.
function(dlock_embed_sql out_var)
  cmake_parse_arguments(ARG "" "NAMESPACE;NAME" "FILES" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.cc)
  set(body "")
  list(SORT ARG_FILES)
  foreach(f ${ARG_FILES})
    get_filename_component(base ${f} NAME)
    string(REGEX MATCH "^[0-9]+" version ${base})
    math(EXPR version "${version}")
    file(READ ${f} sql)
    string(APPEND body "      {${version}, R\"dlocksql(${sql})dlocksql\"},\n")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
  endforeach()
  file(CONFIGURE OUTPUT ${out} CONTENT
"// Generated from ${ARG_NAME} migration files by cmake/EmbedSql.cmake. Do not edit.
#include <string_view>
#include <utility>
#include <vector>
namespace ${ARG_NAMESPACE} {
const std::vector<std::pair<int, std::string_view>>& migrations() {
  static const std::vector<std::pair<int, std::string_view>> kMigrations = {
${body}  };
  return kMigrations;
}
}  // namespace ${ARG_NAMESPACE}
" @ONLY)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
