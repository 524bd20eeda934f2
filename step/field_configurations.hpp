// The named configurations of real projects' gathered contrastive losses, as
// strategy points: one registry, one entry per configuration, in the order
// and with the numbers of docs/field.md (which cites each source and says
// how the configuration was read). Adding a project = one entry here and one
// row there; tests/step/field_configurations_test.cpp checks that both agree
// and that each entry's strategy point predicts what the doc says.
#pragma once

#include <span>
#include <string_view>

#include "step/strategy.hpp"

namespace infonce::step {

struct FieldConfiguration {
  int row;                         // its row number in docs/field.md
  std::string_view project;        // "owner/name" on GitHub
  std::string_view configuration;  // the class and the options that select this point
  std::string_view source;         // the file (and commit) the configuration is read from
  Strategy strategy;
  // What in this configuration enters the loss directly; empty when nothing
  // does (the temperature is a fixed number): the direct-parameter verdict
  // is then what a learnable one would get at the same point.
  std::string_view direct_parameters;
  // docs/field.md marks the row with a dagger: some cell rests on something
  // the cited file does not show (its note there names what).
  bool unconfirmed;
};

// Every configuration, by row number (1, 2, ...).
std::span<const FieldConfiguration> field_configurations();

}  // namespace infonce::step
