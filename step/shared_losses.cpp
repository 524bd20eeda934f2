#include "step/shared_losses.hpp"

#include <cstring>
#include <span>

#include "base/assert.hpp"

namespace infonce::step {
namespace {

// A word-at-a-time hash (an index only: equality is always checked in full).
class InputHash {
 public:
  void add(std::uint64_t word) {
    h_ = (h_ ^ word) * 0x9e3779b97f4a7c15ULL;
    h_ ^= h_ >> 29;
  }
  template <class T>
  void add(std::span<const T> values) {
    add(values.size());
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    const std::size_t size = values.size_bytes();
    std::size_t i = 0;
    for (; i + 8 <= size; i += 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes + i, 8);
      add(word);
    }
    std::uint64_t tail = 0;
    if (i < size) std::memcpy(&tail, bytes + i, size - i);  // (never memcpy from a null span)
    add(tail);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0;
};

// The key combines the micro-step with each input's own hash, so an input's
// hash can be computed once and kept with it (SharedInput).
std::uint64_t input_hash(std::int32_t micro, std::uint64_t embeddings_hash,
                         std::uint64_t layout_hash) {
  InputHash h;
  h.add(static_cast<std::uint64_t>(micro));
  h.add(embeddings_hash);
  h.add(layout_hash);
  return h.value();
}

bool same_settings(const loss::LossSettings& a, const loss::LossSettings& b) {
  return a.temperature == b.temperature && a.use_batch == b.use_batch &&
         a.hard_negatives == b.hard_negatives && a.padding == b.padding &&
         a.mask_fake_negative == b.mask_fake_negative && a.fake_neg_margin == b.fake_neg_margin &&
         a.include_qq == b.include_qq && a.include_dd == b.include_dd;
}

template <class Scalar>
bool same_bits(const Matrix<Scalar>& a, const Matrix<Scalar>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(),
                                       sizeof(Scalar) * static_cast<std::size_t>(a.size())) == 0);
}

}  // namespace

template <class Scalar>
std::uint64_t SharedLosses<Scalar>::hash_of(const Matrix<Scalar>& embeddings) {
  InputHash h;
  h.add(static_cast<std::uint64_t>(embeddings.rows()));
  h.add(std::span<const Scalar>(embeddings.data(), static_cast<std::size_t>(embeddings.size())));
  return h.value();
}

template <class Scalar>
std::uint64_t SharedLosses<Scalar>::hash_of(const loss::GroupLayout& layout) {
  InputHash h;
  h.add(std::span<const std::int32_t>(layout.rows));
  h.add(std::span<const std::int32_t>(layout.offsets));
  return h.value();
}

template <class Scalar>
std::shared_ptr<const loss::LossAndGradient<Scalar>> SharedLosses<Scalar>::lookup(
    std::int32_t micro, const Matrix<Scalar>& embeddings, std::uint64_t embeddings_hash,
    std::shared_ptr<const Matrix<Scalar>> embeddings_owner, const loss::GroupLayout& layout,
    std::uint64_t layout_hash, std::shared_ptr<const loss::GroupLayout> layout_owner,
    const loss::LossSettings& settings, loss::CodePath path) {
  const std::uint64_t key = input_hash(micro, embeddings_hash, layout_hash);
  const auto [first, last] = index_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    const Entry& e = entries_[it->second];
    // The same object is the same bits (immutable, kept alive by the entry);
    // another object is compared in full.
    if (e.micro == micro && e.path == path && same_settings(e.settings, settings) &&
        (e.layout.get() == &layout ||
         (e.layout->rows == layout.rows && e.layout->offsets == layout.offsets)) &&
        (e.embeddings.get() == &embeddings || same_bits(*e.embeddings, embeddings))) {
      ++reuses_;
      return e.result;
    }
  }
  ++evaluations_;
  auto result = std::make_shared<const loss::LossAndGradient<Scalar>>(
      loss::infonce_loss_and_gradient<Scalar>(embeddings, layout, settings, path));
  if (entries_.size() < kMaxEntries) {
    if (!embeddings_owner) embeddings_owner = std::make_shared<const Matrix<Scalar>>(embeddings);
    if (!layout_owner) layout_owner = std::make_shared<const loss::GroupLayout>(layout);
    index_.emplace(key, entries_.size());
    entries_.push_back(
        {micro, std::move(embeddings_owner), std::move(layout_owner), settings, path, result});
  }
  return result;
}

template <class Scalar>
std::shared_ptr<const loss::LossAndGradient<Scalar>> SharedLosses<Scalar>::loss_and_gradient(
    std::int32_t micro, const Matrix<Scalar>& embeddings, const loss::GroupLayout& layout,
    const loss::LossSettings& settings, loss::CodePath path) {
  return lookup(micro, embeddings, hash_of(embeddings), nullptr, layout, hash_of(layout), nullptr,
                settings, path);
}

template <class Scalar>
std::shared_ptr<const loss::LossAndGradient<Scalar>> SharedLosses<Scalar>::loss_and_gradient(
    std::int32_t micro, const SharedInput<Matrix<Scalar>>& embeddings,
    const SharedInput<loss::GroupLayout>& layout, const loss::LossSettings& settings,
    loss::CodePath path) {
  INFONCE_ASSERT(embeddings.value && layout.value);
  return lookup(micro, *embeddings.value, embeddings.hash, embeddings.value, *layout.value,
                layout.hash, layout.value, settings, path);
}

template class SharedLosses<double>;
template class SharedLosses<float>;

}  // namespace infonce::step
