// A deliberate violation for prediction.include_check_rejects_a_violation: a
// prediction that reads the step's own backward scale.
#pragma once

#include "casefile/strategy_value.hpp"
#include "step/strategy.hpp"
