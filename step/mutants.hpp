// The known-bug zoo: one registry of named variants of the data-parallel
// step. A mutant changes the distributed run only (the case as the rank
// program sees it, and the program's knobs); the reference is always the
// correct full-batch objective. Adding a mutant is adding one entry.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "casefile/case.hpp"
#include "step/variant.hpp"

namespace infonce::step {

// The property that catches the mutant: the first failure the campaign
// reports for it (the one it shrinks by). Every mutant is caught by one;
// equivalent mutants have no place in the registry.
enum class CaughtBy {
  gradient,    // property 1: distributed gradient/loss equals the reference
  padding,     // property 6: padding never selects the positive
  equal_loss,  // property 5: every rank reports the same loss
  crash,       // step-runs: the distributed step throws where the trainer would raise
};

struct Mutant {
  std::string_view name;
  std::string_view summary;
  CaughtBy caught_by;
  std::function<void(Case& distributed_case, StepVariant& variant)> apply;
};

std::span<const Mutant> mutant_registry();
// nullptr if no mutant has this name.
const Mutant* find_mutant(std::string_view name);

}  // namespace infonce::step
