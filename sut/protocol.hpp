// `infonce-sut/1` (docs/sut-protocol.md): the handshake, requests and
// responses as values, and their JSON lines. Every parse error is a
// ProtocolError whose one-line message names the key and the shape expected.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "casefile/case.hpp"

namespace infonce::sut {

inline constexpr std::string_view kProtocol = "infonce-sut/1";

class ProtocolError : public std::runtime_error {
 public:
  explicit ProtocolError(const std::string& message) : std::runtime_error(message) {}
};

// A line that is not the awaited message at all (not a JSON object, or a
// response to another request): the conversation is out of step.
class OutOfStep : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

// What the SUT can run (the handshake's `supports`). A key absent from the
// handshake means: only the case-file default of that axis.
struct Supports {
  std::vector<bool> use_batch{true};
  bool hard_negatives = false;
  std::vector<loss::Padding> padding{loss::Padding::legacy};  // the case-file default
  bool mask_fake_negative = false;
  bool include_qq = false;
  bool include_dd = false;
  std::vector<Reduction> reductions{Reduction::mean};
  std::vector<GatherPath> gathers{GatherPath::object};
  std::vector<ScalarType> dtypes{ScalarType::float64};
  std::int32_t max_world = 1;
  std::int32_t max_replicas = 1;
  std::int32_t min_dim = 1;  // the smallest feature and embedding dimension it runs
  bool compensate_false = false;
  std::vector<bool> accumulation_normalize{true};
  std::vector<RngMode> rng_modes{RngMode::synced};
  bool replays_padding_draws = false;
  std::vector<std::string> extension_keys;
  // The loss families it runs ("infonce", "clip", "ntxent", "siglip"; CLIP,
  // NT-Xent and SigLIP cases carry the extension key "family"), whether a CLIP case may have a
  // logit bias, and whether DP shards may hold different numbers of groups,
  // pairs or samples.
  bool infonce_family = true;
  bool clip_family = false;
  bool ntxent_family = false;
  bool siglip_family = false;
  bool logit_bias = false;
  bool unequal_batches = true;
  // Whether queries may hold different numbers of documents (k differs from
  // group to group), and whether ranks may hold batches of different shapes
  // (row counts) in one micro-step (a plain tensor all_gather needs one shape).
  bool unequal_documents = true;
  bool unequal_shapes = true;
  // reported_loss: "global" (every rank reports the global batch's loss) or
  // "rank-local" (each rank reports the loss of its own rows, as an autograd
  // gather followed by a local loss does).
  bool rank_local_loss = false;

  bool declares(std::string_view key) const;
};

struct Handshake {
  std::string name;
  Supports supports;
};

// Throws ProtocolError: not JSON, a missing or mistyped key, or another
// protocol version (the message names both versions).
Handshake parse_handshake(std::string_view line);

// {"id": id, "case": ...}: the case as a case file, without `expect` or
// `found`, without an extension key the SUT did not declare, and without
// `padding_draws` unless the SUT replays them.
std::string encode_request(std::int64_t id, const Case& c, const Supports& supports);
// The same, from the case file text of the case (case_to_json).
std::string encode_request(std::int64_t id, const std::string& case_json, const Supports& supports);

// What the SUT reports of one step.
struct StepResult {
  std::vector<double> losses;  // per world rank; NaN for null
  Matrix<double> grad;         // D x F, as on world rank 0
  std::vector<double> direct;  // the direct parameters' gradients (direct_parameter_names)
  std::optional<std::vector<Matrix<double>>> grads;  // per world rank
  std::optional<loss::RecordedDraws> padding_draws;  // [micro][world rank][draw]
};

struct Response {
  std::optional<StepResult> result;
  std::string error;       // set when the SUT answered with an error
  std::string declined{};  // set when the SUT declined the case (its reason): not a failure
};

// Checks the id and every shape against the case (W ranks, D x F gradient,
// A micro-steps). Throws ProtocolError naming the key.
Response parse_response(std::string_view line, std::int64_t id, const Case& c);

// The first axis of `c` outside what the SUT supports, as one line; nullopt
// when the SUT can run the case (a case file replayed with --sut).
std::optional<std::string> outside_supports(const Case& c, const Supports& supports);
// Whether some micro-step's DP shards hold different numbers of groups
// (InfoNCE) or pairs (CLIP).
bool has_unequal_batches(const Case& c);
// Whether two queries of the case hold different numbers of documents
// (InfoNCE groups with different k; a CLIP query always has one).
bool has_unequal_documents(const Case& c);
// Whether some micro-step's DP shards hold different numbers of rows.
bool has_unequal_shapes(const Case& c);

// Text shown for a line of junk: cut to 200 characters, on one line.
std::string shown_line(std::string_view line);

}  // namespace infonce::sut
