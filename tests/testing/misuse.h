// expect_broken_rule: the Status of an execution whose operator broke a rule of the API names the
// operator ('Bad'), the dataflow ('misuse'), the worker (0) and the rule.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weir::testing {

inline void expect_broken_rule(const absl::Status& status, const std::string& rule) {
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("operator 'Bad'"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("dataflow 'misuse'"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("worker 0"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr(rule));
}

}  // namespace weir::testing
