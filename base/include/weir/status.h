// Status helpers: weir reports failures from outside (network, files, config, peers, user input)
// as absl::Status / absl::StatusOr<T>. These macros keep the call sites short.
//
//   absl::StatusOr<Config> Config::parse(...);
//   WEIR_ASSIGN_OR_RETURN(Config config, Config::parse(args));
//   WEIR_RETURN_IF_ERROR(file.close());

#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WEIR_STATUS_CONCAT_INNER_(a, b) a##b
#define WEIR_STATUS_CONCAT_(a, b) WEIR_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define WEIR_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status weir_status_ = (expr);        \
    if (!weir_status_.ok()) return weir_status_; \
  } while (false)

// Declares/assigns `lhs` from the value of a StatusOr `expr`, or returns its error.
#define WEIR_ASSIGN_OR_RETURN(lhs, expr) \
  WEIR_ASSIGN_OR_RETURN_IMPL_(WEIR_STATUS_CONCAT_(weir_statusor_, __LINE__), lhs, expr)

// `lhs` is a declaration or an lvalue, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define WEIR_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
// NOLINTEND(bugprone-macro-parentheses)
