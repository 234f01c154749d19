#pragma once

// The web console's files (src/console/ui), embedded in the binary by src/console/CMakeLists.txt
// and served by dlockd at /ui/ (server/api_console.cc, docs/console.md).

#include <string_view>

namespace dlock::console {

struct File {
  std::string_view name;          // "index.html", "app.js": the file's name under src/console/ui
  std::string_view content_type;  // from its extension
  std::string_view content;
};

// The file of that name, or null.
const File* find(std::string_view name);

}  // namespace dlock::console
