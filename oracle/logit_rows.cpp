#include "oracle/logit_rows.hpp"

namespace infonce::oracle {

std::vector<LogitRow> batch_rows(const std::vector<Group>& groups, const LossSettings& settings) {
  std::vector<std::int32_t> docs;
  std::vector<std::int32_t> target_of;  // t_g
  for (const Group& group : groups) {
    target_of.push_back(static_cast<std::int32_t>(docs.size()));
    docs.push_back(group.positive);
    docs.insert(docs.end(), group.negatives.begin(), group.negatives.end());
  }
  std::vector<LogitRow> rows(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    LogitRow& row = rows[g];
    row.entries.reserve(docs.size() * (settings.include_dd ? 2 : 1) +
                        (settings.include_qq ? groups.size() : 0));
    const std::int32_t q = groups[g].query;
    const std::int32_t p = groups[g].positive;
    for (const std::int32_t doc : docs) row.entries.push_back({q, doc, Block::qd});
    row.target = target_of[g];
    if (settings.include_qq) {
      for (std::size_t h = 0; h < groups.size(); ++h) {
        if (h != g) row.entries.push_back({q, groups[h].query, Block::qq});
      }
    }
    if (settings.include_dd) {
      for (std::size_t j = 0; j < docs.size(); ++j) {
        if (static_cast<std::int32_t>(j) != target_of[g]) {
          row.entries.push_back({p, docs[j], Block::dd});
        }
      }
    }
  }
  return rows;
}

std::vector<LogitRow> own_group_rows(const std::vector<Group>& groups) {
  std::vector<LogitRow> rows(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    rows[g].entries.push_back({group.query, group.positive, Block::qd});
    for (const std::int32_t n : group.negatives) {
      rows[g].entries.push_back({group.query, n, Block::qd});
    }
    rows[g].target = 0;
  }
  return rows;
}

}  // namespace infonce::oracle
