// The campaign's step run by an external system under test over the
// `infonce-sut/1` channel (sut/): one SUT process per job. The harness keeps
// the reference, and judges what the SUT reports: gradient and loss against
// the reference, every rank's loss, compensate false giving 1/P (where the
// SUT can run it), padding that never takes the positive (from the draws the
// SUT reports), and a step that runs. The SUT's padding draws of each DP
// shard's first replica are the reference's draws.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "properties/external_step.hpp"
#include "properties/restriction.hpp"
#include "properties/strategy_campaign.hpp"
#include "sut/session.hpp"

namespace infonce::properties {

// The generator restriction a handshake asks for. Throws InputError when the
// SUT cannot run what every generated case needs (synced generators).
Restriction restriction_of(const sut::Supports& supports);

// What the report says of a handshake beyond the generator's restriction:
// the checks it changes (a rank-local reported loss is not compared with the
// reference's).
std::vector<std::string> handshake_notes(const sut::Supports& supports);

// What a check sent ahead on its session: the reference of that case.
struct SentAhead {
  std::optional<step::ReferenceValues> reference;
};
// One case on one SUT session; the case is already adapted. `options`:
// where oracle-agrees runs (its mode and the case's index). `next`: the case
// checked next on this session, if known (else nullptr). It is sent as soon
// as `c`'s response is in, so that the SUT computes it while `c` is judged,
// and its reference is computed while the SUT computes `c`. The SUT sees the
// same requests (a case sent ahead and then not checked, after a failure or
// at the clock's end, is answered and dropped). `ahead`: the session's.
CaseVerdict check_external_case(const Case& c, sut::Session& session,
                                const PropertyOptions& options, const ExternalStep::Upcoming* next,
                                SentAhead& ahead);

// The SUT's step of `c` read as the harness reads a step (every rank's loss
// and flat gradient: W's entries, then the direct parameters'), with the
// reference of `c` padded with the draws of each DP shard's first replica
// where the SUT drew (`reference`: the case's own). Throws
// StepFailure with the SUT's one-line failure (a crash, a hang, a malformed
// response, or its own error).
class StepFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
StepRun run_on_sut(sut::Session& session, const Case& c, const step::ReferenceValues& reference);

// Each rank's loss restricted to its own rows: SPEC section 9's local scope,
// L_d = the mean (or sum) over the rank's own groups of l_g, the per-group
// term of the global loss (its queries against every gathered document), over
// the case's gather group. The rank program reports exactly that at a local
// point; the gather kind and the backward scale change the gradient, not the
// reported value. What a SUT with a rank-local reported loss must report.
std::vector<double> rank_local_losses(const Case& c);

class SutStep final : public ExternalStep {
 public:
  // Starts `jobs` SUT processes and reads their handshakes, which must be
  // the same. Throws InputError (exit 2) with one line otherwise.
  SutStep(const std::string& command, double timeout_seconds, std::int32_t jobs);

  const sut::Handshake& handshake() const { return sessions_.front()->handshake(); }
  const Restriction& restriction() const { return restriction_; }

  Case adapt(Case c) const override;
  CaseVerdict check(const Case& c, std::int32_t job, const PropertyOptions& options) override;
  CaseVerdict check_before(const Case& c, std::int32_t job, const PropertyOptions& options,
                           const Upcoming& next) override;

 private:
  CaseVerdict check_on(const Case& c, std::int32_t job, const PropertyOptions& options,
                       const Upcoming* next);

  std::vector<std::unique_ptr<sut::Session>> sessions_;
  std::vector<SentAhead> ahead_;  // per session
  Restriction restriction_;
};

}  // namespace infonce::properties
