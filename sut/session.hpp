// One SUT process and its conversation: the handshake, requests answered in
// order, and a restart after anything that leaves the channel out of step (a
// crash, a hang, a line that is not the response). A failed step is an outcome,
// not an exception: the campaign records it as a failure of `step-runs` and goes on.
//
// At most one request is on its way ahead of the one being read: the campaign
// sends the next case before it judges this one (send_ahead), so that the SUT
// computes while the harness judges. Its response is read in turn, and kept
// for the run() of that case; a case asked for instead of it settles it first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "casefile/case.hpp"
#include "sut/channel.hpp"
#include "sut/protocol.hpp"

namespace infonce::sut {

inline constexpr double kDefaultTimeoutSeconds = 60;

struct StepOutcome {
  std::optional<StepResult> result;
  std::string failure;     // one line, when there is no result
  bool restarted = false;  // the SUT was killed or had died: the next step starts a new one
  std::string declined{};  // the SUT's reason, when it declined the case (not a failure)
};

class Session {
 public:
  // Starts `command` and reads its handshake. Throws InputError (exit 2)
  // with one line if the handshake is missing, malformed or of another version.
  Session(std::string command, double timeout_seconds);

  const Handshake& handshake() const { return handshake_; }
  const std::string& handshake_line() const { return handshake_line_; }

  // The outcome of `c`: the one sent ahead (claimed, or started), or a request
  // sent now. Never throws for the SUT's misbehaviour. A request sent ahead
  // and not claimed is settled (its response read and kept) first.
  StepOutcome run(const Case& c);

  // Sends `c` without waiting (nothing else may be on its way): the next
  // claim() of the same case finds it. Nothing is sent to a SUT that is down.
  void send_ahead(const Case& c);
  // Whether `c` is the request sent ahead (then the next run() is its
  // outcome). A request sent ahead for another case is settled and dropped.
  bool claim(const Case& c);
  // Sends `c` now for the next run(c) to read (nothing else on its way).
  void start(const Case& c);

  // Requests answered by the current process (the next request's id).
  std::int64_t next_id() const { return next_id_; }

 private:
  // A fresh process; the handshake must be the first one's, byte for byte.
  std::optional<std::string> restart();
  // The outcome a response line gives (a line out of step ends the process).
  StepOutcome outcome_of(const std::string& line, std::int64_t id, const Case& c);
  // Posts `c`'s request as the one on its way (claimed: run() takes it).
  void post(const Case& c, bool claimed);
  // Reads the response of the request on its way into its outcome.
  void settle();

  // The request on its way ahead of any other, and its outcome once read.
  struct InFlight {
    std::int64_t id = 0;
    std::string case_json;  // case_to_json(c): what claim() compares
    Case c;
    bool claimed = false;
    std::optional<StepOutcome> outcome;
  };

  std::string command_;
  double timeout_seconds_;
  std::unique_ptr<Channel> channel_;
  Handshake handshake_;
  std::string handshake_line_;
  std::int64_t next_id_ = 0;
  std::optional<InFlight> in_flight_;
};

}  // namespace infonce::sut
