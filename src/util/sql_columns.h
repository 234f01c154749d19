#pragma once

// The result columns of one SQL statement, named beside its text (store/pg/pg_statements.h,
// store/sqlite/sqlite_statements.h). A read names its column: `columns["expiry_us"]` is that
// column's index, found at compile time (a name not in the list does not compile). Each store
// compares a statement's list with the names the database gives the statement's result columns
// when it prepares it (column_mismatch), so a statement whose columns were reordered, added or
// removed fails where it is prepared instead of shifting a read.

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::util {

template <std::size_t N>
struct SqlColumns {
  std::array<std::string_view, N> names;

  // The index of column `name`; a compile error when the list has no such column.
  consteval int operator[](std::string_view name) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    throw "the statement's column list has no column of this name";
  }

  // Whether this list begins with `prefix`: a row of this statement is also a row of `prefix`'s.
  template <std::size_t M>
  constexpr bool starts_with(const SqlColumns<M>& prefix) const {
    if (M > N) return false;
    for (std::size_t i = 0; i < M; ++i) {
      if (names[i] != prefix.names[i]) return false;
    }
    return true;
  }

  std::span<const std::string_view> list() const { return names; }
};

template <class... Names>
SqlColumns(Names...) -> SqlColumns<sizeof...(Names)>;

// `first`'s columns, then `then`'s.
template <std::size_t N, std::size_t M>
constexpr SqlColumns<N + M> operator+(const SqlColumns<N>& first, const SqlColumns<M>& then) {
  SqlColumns<N + M> joined{};
  for (std::size_t i = 0; i < N; ++i) joined.names[i] = first.names[i];
  for (std::size_t i = 0; i < M; ++i) joined.names[N + i] = then.names[i];
  return joined;
}

// Empty when `actual`, the names the database gives a statement's result columns in their order,
// are `declared`; otherwise a message naming both lists.
inline std::string column_mismatch(std::span<const std::string_view> declared,
                                   const std::vector<std::string>& actual) {
  bool same = declared.size() == actual.size();
  for (std::size_t i = 0; same && i < actual.size(); ++i) same = declared[i] == actual[i];
  if (same) return {};
  const auto joined = [](const auto& names) {
    std::string text = "(";
    for (const auto& name : names) {
      if (text.size() > 1) text += ", ";
      text += name;
    }
    return text + ")";
  };
  return "the statement returns columns " + joined(actual) + " where its reads expect " +
         joined(declared);
}

}  // namespace dlock::util
