#include "loss/padding.hpp"

#include <span>
#include <string>
#include <utility>

#include "base/assert.hpp"
#include "base/error.hpp"

namespace infonce::loss {

namespace {

std::string draws_key(std::int32_t micro, std::int32_t stream) {
  return "padding_draws[" + std::to_string(micro) + "][" + std::to_string(stream) + "]";
}

}  // namespace

// ---- GeneratedPadding ----

class GeneratedPadding::Source final : public PaddingDrawSource {
 public:
  explicit Source(std::uint64_t seed) : rng_(seed) {}
  std::int32_t draw(std::int32_t negative_count) override {
    INFONCE_ASSERT(negative_count >= 1);
    return static_cast<std::int32_t>(rng_.below(static_cast<std::uint64_t>(negative_count)));
  }

 private:
  Rng rng_;
};

GeneratedPadding::GeneratedPadding(std::vector<std::uint64_t> seed_of_stream) {
  sources_.reserve(seed_of_stream.size());
  for (const std::uint64_t seed : seed_of_stream)
    sources_.push_back(std::make_unique<Source>(seed));
}

PaddingDrawSource& GeneratedPadding::source(std::int32_t /*micro*/, std::int32_t stream) {
  // One generator per stream runs on across micro-steps, as numpy's global one does.
  if (stream < 0 || static_cast<std::size_t>(stream) >= sources_.size()) {
    throw InputError("padding stream " + std::to_string(stream) + " out of range (" +
                     std::to_string(sources_.size()) + " generators)");
  }
  return *sources_[static_cast<std::size_t>(stream)];
}

// ---- RecordedPadding ----

class RecordedPadding::Source final : public PaddingDrawSource {
 public:
  Source(std::span<const std::int32_t> draws, std::int32_t micro, std::int32_t stream)
      : draws_(draws), micro_(micro), stream_(stream) {}

  std::int32_t draw(std::int32_t negative_count) override {
    INFONCE_ASSERT(negative_count >= 1);
    if (next_ >= draws_.size()) throw InputError(draws_key(micro_, stream_) + ": ran out of draws");
    const std::int32_t j = draws_[next_++];
    if (j < 0 || j >= negative_count) {
      throw InputError(draws_key(micro_, stream_) + ": index " + std::to_string(j) +
                       " out of range for a group with " + std::to_string(negative_count) +
                       " negatives");
    }
    return j;
  }

  std::size_t unused() const { return draws_.size() - next_; }

 private:
  std::span<const std::int32_t> draws_;
  std::size_t next_ = 0;
  std::int32_t micro_;
  std::int32_t stream_;
};

RecordedPadding::RecordedPadding(const RecordedDraws& draws) : owned_(draws), draws_(&owned_) {}

RecordedPadding::RecordedPadding(Viewing, const RecordedDraws& draws) : draws_(&draws) {}

std::unique_ptr<RecordedPadding> RecordedPadding::viewing(const RecordedDraws& draws) {
  return std::unique_ptr<RecordedPadding>(new RecordedPadding(Viewing{}, draws));
}

PaddingDrawSource& RecordedPadding::source(std::int32_t micro, std::int32_t stream) {
  const RecordedDraws& draws = *draws_;
  if (micro < 0 || static_cast<std::size_t>(micro) >= draws.size()) {
    throw InputError(draws_key(micro, stream) + ": no such micro-step (padding_draws has " +
                     std::to_string(draws.size()) + ")");
  }
  const auto& streams = draws[static_cast<std::size_t>(micro)];
  if (stream < 0 || static_cast<std::size_t>(stream) >= streams.size()) {
    throw InputError(draws_key(micro, stream) + ": no such stream (padding_draws[" +
                     std::to_string(micro) + "] has " + std::to_string(streams.size()) + ")");
  }
  auto& source = sources_[{micro, stream}];
  if (!source)
    source = std::make_unique<Source>(streams[static_cast<std::size_t>(stream)], micro, stream);
  return *source;
}

void RecordedPadding::check_all_used() const {
  const RecordedDraws& draws = *draws_;
  for (std::size_t m = 0; m < draws.size(); ++m) {
    for (std::size_t s = 0; s < draws[m].size(); ++s) {
      const auto micro = static_cast<std::int32_t>(m);
      const auto stream = static_cast<std::int32_t>(s);
      const auto it = sources_.find({micro, stream});
      const std::size_t unused = it == sources_.end() ? draws[m][s].size() : it->second->unused();
      if (unused > 0) {
        throw InputError(draws_key(micro, stream) + ": " + std::to_string(unused) +
                         " draws left unused");
      }
    }
  }
}

GeneratedPadding::~GeneratedPadding() = default;
RecordedPadding::~RecordedPadding() = default;

}  // namespace infonce::loss
