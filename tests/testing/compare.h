// Error measures the tests share: the largest per-row relative error ‖a − b‖ / ‖b‖ (the metric
// of issue 4's acceptance and of `dsv4 verify`), defined once in base/row_error.h.
#pragma once

#include "base/row_error.h"

namespace dsv4::testing {

using ::dsv4::max_row_rel_error;

}  // namespace dsv4::testing
