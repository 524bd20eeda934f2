// The distributed strategy of a step as a plain value (issue 13): what the
// gather hands the loss, which queries the loss covers, the backward scale,
// and the DDP reduction. The case file's optional key "strategy" holds one
// (MODEL.md section 7); step/strategy.hpp predicts what each point gives and
// step/rank_program.cpp composes the rank program from it.
#pragma once

namespace infonce {

enum class Reduction { mean, sum };

// What the gather of the embeddings hands the loss.
enum class GatherKind {
  detached_own_live,  // a detached all-gather, the rank's own slot put back live (the seed's fix)
  detached,           // a detached all-gather, no slot live (open_clip local_loss alone)
  autograd,           // an all-gather whose backward is a reduce-scatter (sum over ranks)
};

// Which queries a rank's loss covers.
enum class LossScope {
  global,  // every gathered query against every gathered document, targets on the global index
  local,   // the rank's own (live) queries against every gathered document, targets offset by
           // the rank's row prefix
};

// The factor s on the rank's backward signal (the reported loss is unscaled).
enum class BackwardScale { none, dp_shards, world_size };

struct Strategy {
  GatherKind gather = GatherKind::detached_own_live;
  LossScope scope = LossScope::global;
  BackwardScale scale = BackwardScale::dp_shards;
  Reduction reduction = Reduction::mean;  // DDP: mean over W ranks; Megatron per-token: sum over P

  friend bool operator==(const Strategy&, const Strategy&) = default;
};

}  // namespace infonce
