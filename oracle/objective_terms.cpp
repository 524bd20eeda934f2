#include "oracle/objective_terms.hpp"

#include <string>

#include "base/error.hpp"
#include "oracle/groups.hpp"
#include "oracle/padding.hpp"

namespace infonce::oracle {
namespace {

const Draws kNoDraws;

const Draws& draws_of(const Description& description, std::size_t micro, std::size_t stream) {
  if (micro >= description.draws.size() || stream >= description.draws[micro].size()) {
    return kNoDraws;
  }
  return description.draws[micro][stream];
}

// Sentences and labels of shards [first, last), laid end to end.
ShardInput concatenate(const std::vector<ShardInput>& shards, std::size_t first, std::size_t last,
                       Eigen::Index features) {
  ShardInput out;
  Eigen::Index rows = 0;
  for (std::size_t d = first; d < last; ++d) rows += shards[d].sentences.rows();
  out.sentences.resize(rows, features);
  rows = 0;
  for (std::size_t d = first; d < last; ++d) {
    out.sentences.middleRows(rows, shards[d].sentences.rows()) = shards[d].sentences;
    rows += shards[d].sentences.rows();
    out.labels.insert(out.labels.end(), shards[d].labels.begin(), shards[d].labels.end());
  }
  return out;
}

LossTerm make_term(const Description& description, ShardInput input, const Draws& draws,
                   const std::string& where) {
  const LossSettings& settings = description.loss;
  std::vector<Group> groups =
      parse_groups(input.labels, static_cast<std::int32_t>(input.sentences.rows()));
  if (groups.empty()) throw InputError("oracle: " + where + " has no groups");
  DrawStream stream(draws);
  if (settings.hard_negatives) {
    resize_hard_negatives(groups, *settings.hard_negatives, settings.padding, stream);
  }
  if (stream.left() != 0) {
    throw InputError("oracle: " + std::to_string(stream.left()) + " padding draws of " + where +
                     " left over");
  }
  LossTerm term;
  term.sentences = std::move(input.sentences);
  if (settings.use_batch) {
    term.rows = batch_rows(groups, settings);
    term.apply_mask = settings.mask_fake_negative;
  } else {
    term.rows = own_group_rows(groups);
  }
  return term;
}

}  // namespace

std::vector<LossTerm> objective_terms(const Description& description) {
  const std::size_t micro_steps = description.micro_steps.size();
  const Real per_micro =
      description.accumulation_normalize ? 1 / static_cast<Real>(micro_steps) : Real(1);
  const Eigen::Index features = description.weight.cols();
  std::vector<LossTerm> terms;
  for (std::size_t m = 0; m < micro_steps; ++m) {
    const std::vector<ShardInput>& shards = description.micro_steps[m];
    const std::string micro = "micro-step " + std::to_string(m);
    if (description.loss.use_batch) {
      LossTerm term = make_term(description, concatenate(shards, 0, shards.size(), features),
                                draws_of(description, m, 0), micro);
      term.weight = term.report_weight = per_micro;
      terms.push_back(std::move(term));
      continue;
    }
    const Real per_shard =
        description.sum_over_shards ? Real(1) : 1 / static_cast<Real>(shards.size());
    for (std::size_t d = 0; d < shards.size(); ++d) {
      LossTerm term = make_term(description, concatenate(shards, d, d + 1, features),
                                draws_of(description, m, d), micro + " shard " + std::to_string(d));
      term.weight = per_micro * per_shard;
      term.report_weight = per_micro;
      term.shard = static_cast<std::int32_t>(d);
      terms.push_back(std::move(term));
    }
  }
  return terms;
}

}  // namespace infonce::oracle
