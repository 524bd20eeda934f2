// Shared helpers of the loss tests: mode enumeration, seeded random cases,
// error measures, and an independent forward written straight from SPEC
// section 2 (naive loops, masked entries left out of the softmax instead of
// set to -inf), generic over the scalar so Eigen's AutoDiff can run it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/rng.hpp"
#include "loss/encoder.hpp"
#include "loss/groups.hpp"
#include "loss/infonce.hpp"
#include "loss/matrix.hpp"
#include "loss/padding.hpp"
#include "loss/settings.hpp"

namespace infonce::loss::testing {

// ---- modes ----

struct Mode {
  bool use_batch = true;
  bool include_qq = false;
  bool include_dd = false;
  bool mask = false;
  std::optional<std::int32_t> hard_negatives;
  Padding padding = Padding::legacy;
  double temperature = 0.1;
  bool normalize = true;

  std::string name() const {
    std::string s = use_batch ? "batch" : "local";
    if (include_qq) s += "+qq";
    if (include_dd) s += "+dd";
    if (mask) s += "+mask";
    if (hard_negatives) s += "+H" + std::to_string(*hard_negatives);
    s += padding == Padding::legacy ? "+legacy" : "+fixed";
    s += "+T" + std::to_string(temperature).substr(0, 4);
    s += normalize ? "+norm" : "+raw";
    return s;
  }
};

// Every combination of use_batch x qq x dd x mask x hard_negatives x padding x
// temperature x normalize (256).
inline std::vector<Mode> all_modes() {
  std::vector<Mode> modes;
  for (int bits = 0; bits < 256; ++bits) {
    Mode m;
    m.use_batch = (bits & 1) != 0;
    m.include_qq = (bits & 2) != 0;
    m.include_dd = (bits & 4) != 0;
    m.mask = (bits & 8) != 0;
    if ((bits & 16) != 0) m.hard_negatives = 2;
    m.padding = (bits & 32) != 0 ? Padding::fixed : Padding::legacy;
    m.temperature = (bits & 64) != 0 ? 0.7 : 0.1;
    m.normalize = (bits & 128) != 0;
    modes.push_back(m);
  }
  return modes;
}

// ---- random cases ----

struct RandomCase {
  LossSettings settings;
  bool normalize = true;
  Matrix<double> weight;    // D x F
  Matrix<double> features;  // N x F
  GroupLayout layout;       // parsed from labels, then resized for hard_negatives
};

inline Matrix<double> random_matrix(Rng& rng, Eigen::Index rows, Eigen::Index cols, double scale) {
  Matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i) {
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = scale * rng.normal();
  }
  return m;
}

// 1..4 groups with 0..3 negatives (>= 1 under hard_negatives), all the same
// size when `equal_sizes`; D in 2..4, F in 2..4.
inline RandomCase random_case(const Mode& mode, std::uint64_t seed, bool equal_sizes) {
  Rng rng(seed);
  RandomCase c;
  c.settings.use_batch = mode.use_batch;
  c.settings.include_qq = mode.include_qq;
  c.settings.include_dd = mode.include_dd;
  c.settings.mask_fake_negative = mode.mask;
  c.settings.fake_neg_margin = 0.05 + 0.2 * rng.unit();
  c.settings.hard_negatives = mode.hard_negatives;
  c.settings.padding = mode.padding;
  c.settings.temperature = mode.temperature;
  c.normalize = mode.normalize;
  const auto groups = static_cast<std::int32_t>(rng.between(1, 4));
  const std::int32_t min_negatives = mode.hard_negatives ? 1 : 0;
  std::vector<std::int32_t> negatives;
  const auto shared = static_cast<std::int32_t>(rng.between(min_negatives, 3));
  for (std::int32_t g = 0; g < groups; ++g) {
    negatives.push_back(equal_sizes ? shared
                                    : static_cast<std::int32_t>(rng.between(min_negatives, 3)));
  }
  std::int32_t rows = 0;
  for (const std::int32_t k : negatives) rows += k + 2;
  const auto dim = rng.between(2, 4);
  const auto features = rng.between(2, 4);
  c.weight = random_matrix(rng, dim, features, 0.6);
  c.features = random_matrix(rng, rows, features, 1.0);
  c.layout = parse_groups(labels_for_negative_counts(negatives), rows);
  if (mode.hard_negatives) {
    GeneratedPadding padding({rng.next_u64()});
    c.layout =
        resize_hard_negatives(c.layout, *mode.hard_negatives, mode.padding, padding.source(0, 0));
  }
  return c;
}

inline bool all_groups_same_size(const GroupLayout& layout) {
  for (std::int32_t g = 1; g < layout.group_count(); ++g) {
    if (layout.group(g).size() != layout.group(0).size()) return false;
  }
  return true;
}

inline std::vector<CodePath> applicable_paths(const GroupLayout& layout) {
  if (all_groups_same_size(layout)) return {CodePath::batched, CodePath::loop};
  return {CodePath::loop};
}

inline const char* path_name(CodePath path) {
  return path == CodePath::batched ? "batched" : path == CodePath::loop ? "loop" : "automatic";
}

// ---- error measures ----

// max |a - b| / max |b|: the normwise relative error of SPEC section 6.
template <class A, class B>
double relative_error(const A& actual, const B& expected) {
  const long double scale = expected.template cast<long double>().cwiseAbs().maxCoeff();
  const long double diff =
      (actual.template cast<long double>() - expected.template cast<long double>())
          .cwiseAbs()
          .maxCoeff();
  return static_cast<double>(scale > 0 ? diff / scale : diff);
}

// |a - b| / max(|b|, 1): a loss near 0 (a nearly certain positive) is
// log(1 + tiny), known to ~1e-16 absolutely, not relatively.
inline double scalar_relative_error(long double actual, long double expected) {
  const long double scale = std::max(std::fabs(expected), 1.0L);
  return static_cast<double>(std::fabs(actual - expected) / scale);
}

// ---- the independent forward ----

inline double value_of(double x) {
  return x;
}
inline double value_of(long double x) {
  return static_cast<double>(x);
}
template <class AD>
double value_of(const AD& x) {
  return x.value();
}

// Which raw similarities a forward compared against a threshold, and how close
// the closest came: a finite difference step must stay inside that gap.
struct MaskReport {
  std::vector<bool> masked;  // one per compared entry, in a fixed order
  double min_gap = std::numeric_limits<double>::infinity();
  std::int64_t masked_count = 0;
};

// Cross-entropy of the kept logits with target `target` (kept). Masked entries
// are simply absent.
template <class S>
S cross_entropy_of(const std::vector<S>& logits, std::size_t target) {
  using std::exp;
  using std::log;
  double max_value = value_of(logits[0]);
  for (const S& z : logits) max_value = std::max(max_value, value_of(z));
  S sum = S(0.0);
  for (const S& z : logits) sum += exp(z - S(max_value));
  return log(sum) + S(max_value) - logits[target];
}

template <class S>
S dot_rows(const std::vector<std::vector<S>>& e, std::int32_t a, std::int32_t b) {
  S s = S(0.0);
  for (std::size_t i = 0; i < e[static_cast<std::size_t>(a)].size(); ++i) {
    s += e[static_cast<std::size_t>(a)][i] * e[static_cast<std::size_t>(b)][i];
  }
  return s;
}

// SPEC section 2, read literally. `groups` lists each group's embedding rows
// [q, p, n..]. Requires a non-negative margin (the target is never masked).
template <class S>
S independent_loss(const std::vector<std::vector<S>>& e,
                   const std::vector<std::vector<std::int32_t>>& groups,
                   const LossSettings& settings, MaskReport* report = nullptr) {
  const S temperature = S(settings.temperature);
  S total = S(0.0);
  if (!settings.use_batch) {
    for (const auto& rows : groups) {
      std::vector<S> logits;
      for (std::size_t j = 1; j < rows.size(); ++j) {
        logits.push_back(dot_rows(e, rows[0], rows[j]) / temperature);
      }
      total += cross_entropy_of(logits, 0);
    }
    return total / S(static_cast<double>(groups.size()));
  }
  std::vector<std::int32_t> docs;
  std::vector<std::size_t> target_of;
  for (const auto& rows : groups) {
    target_of.push_back(docs.size());
    docs.insert(docs.end(), rows.begin() + 1, rows.end());
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::int32_t q = groups[g][0];
    const std::int32_t p = groups[g][1];
    const double threshold = value_of(dot_rows(e, q, p)) + settings.fake_neg_margin;
    std::vector<S> logits;
    std::size_t target = 0;
    auto consider = [&](const S& similarity, bool compared) {
      if (settings.mask_fake_negative && compared) {
        const bool masked = value_of(similarity) > threshold;
        if (report != nullptr) {
          report->masked.push_back(masked);
          report->min_gap = std::min(report->min_gap, std::fabs(value_of(similarity) - threshold));
          report->masked_count += masked ? 1 : 0;
        }
        if (masked) return;
      }
      logits.push_back(similarity / temperature);
    };
    for (std::size_t m = 0; m < docs.size(); ++m) {
      if (m == target_of[g]) target = logits.size();
      consider(dot_rows(e, q, docs[m]), /*compared=*/m != target_of[g]);
    }
    if (settings.include_qq) {
      for (std::size_t h = 0; h < groups.size(); ++h) {
        if (h != g) consider(dot_rows(e, q, groups[h][0]), true);
      }
    }
    if (settings.include_dd) {
      for (std::size_t m = 0; m < docs.size(); ++m) {
        if (m != target_of[g]) consider(dot_rows(e, p, docs[m]), false);
      }
    }
    total += cross_entropy_of(logits, target);
  }
  return total / S(static_cast<double>(groups.size()));
}

inline std::vector<std::vector<std::int32_t>> groups_of(const GroupLayout& layout) {
  std::vector<std::vector<std::int32_t>> groups;
  for (std::int32_t g = 0; g < layout.group_count(); ++g) {
    const auto rows = layout.group(g);
    groups.emplace_back(rows.begin(), rows.end());
  }
  return groups;
}

template <class S, class M>
std::vector<std::vector<S>> rows_of(const M& matrix) {
  std::vector<std::vector<S>> rows(static_cast<std::size_t>(matrix.rows()));
  for (Eigen::Index i = 0; i < matrix.rows(); ++i) {
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) {
      rows[static_cast<std::size_t>(i)].push_back(S(matrix(i, j)));
    }
  }
  return rows;
}

// The mask decisions of the independent forward on embeddings E.
template <class M>
MaskReport mask_report(const M& embeddings, const GroupLayout& layout,
                       const LossSettings& settings) {
  MaskReport report;
  independent_loss(rows_of<double>(embeddings), groups_of(layout), settings, &report);
  return report;
}

}  // namespace infonce::loss::testing
