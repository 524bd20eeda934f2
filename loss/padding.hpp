// Where the hard-negative padding indices of a whole step come from.
// The trainer pads with numpy's global generator on each rank, and that
// generator runs on across micro-steps. A plan hands out one draw source per
// (micro-step, stream): with use_batch every rank pads the gathered batch, so
// the stream is the rank's generator; without it each rank pads its own groups.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "base/rng.hpp"
#include "loss/groups.hpp"

namespace infonce::loss {

// draws[micro][stream] -> indices j in the order the trainer drew them.
using RecordedDraws = std::vector<std::vector<std::vector<std::int32_t>>>;

class PaddingPlan {
 public:
  virtual ~PaddingPlan() = default;
  virtual PaddingDrawSource& source(std::int32_t micro, std::int32_t stream) = 0;
  // Throws InputError naming the (micro, stream) if recorded draws were left unused.
  virtual void check_all_used() const {}
};

// Stream s draws from Rng(seed_of_stream[s]); the same Rng runs on across micro-steps.
class GeneratedPadding final : public PaddingPlan {
 public:
  explicit GeneratedPadding(std::vector<std::uint64_t> seed_of_stream);
  ~GeneratedPadding() override;  // out of line: Source is complete only in padding.cpp
  PaddingDrawSource& source(std::int32_t micro, std::int32_t stream) override;

 private:
  class Source;
  std::vector<std::unique_ptr<Source>> sources_;
};

// Replays recorded draws; running out, or an index outside [0, k), is an
// InputError naming padding_draws[micro][stream]. A (micro, stream) whose
// source is never asked for must have no draws (check_all_used).
class RecordedPadding final : public PaddingPlan {
 public:
  // Keeps a copy of the draws.
  explicit RecordedPadding(const RecordedDraws& draws);
  // Reads `draws` in place: they must outlive the plan. (A rank of a step
  // reads one stream of a case's draws, which may hold every rank's.)
  static std::unique_ptr<RecordedPadding> viewing(const RecordedDraws& draws);
  ~RecordedPadding() override;
  PaddingDrawSource& source(std::int32_t micro, std::int32_t stream) override;
  void check_all_used() const override;

 private:
  struct Viewing {};
  RecordedPadding(Viewing, const RecordedDraws& draws);
  class Source;
  RecordedDraws owned_;         // empty when viewing
  const RecordedDraws* draws_;  // owned_ or the viewed draws
  std::map<std::pair<std::int32_t, std::int32_t>, std::unique_ptr<Source>>
      sources_;  // made on first use
};

}  // namespace infonce::loss
