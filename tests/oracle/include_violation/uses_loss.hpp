// A deliberate violation: the include check must reject this directory
// (ctest oracle.include_check_rejects_a_violation).
#pragma once

#include <vector>

#include "base/error.hpp"
#include "loss/groups.hpp"
