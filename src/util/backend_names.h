#pragma once

// The names of the backends (`lock.backend`, Backend::backend_id(), metric labels): spelled once.

#include <array>
#include <string_view>

namespace dlock::backend_names {

inline constexpr std::string_view kSqlite = "sqlite";
inline constexpr std::string_view kPg = "pg";
inline constexpr std::string_view kEtcd = "etcd";
// Every backend the project has, whether or not this build compiled it in.
inline constexpr std::array<std::string_view, 3> kAll = {kSqlite, kPg, kEtcd};

}  // namespace dlock::backend_names
