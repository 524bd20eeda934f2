// One SUT process and its conversation: the handshake, one request at a time,
// and a restart after anything that leaves the channel out of step (a crash,
// a hang, a line that is not the response). A failed step is an outcome, not
// an exception: the campaign records it as a failure of `step-runs` and goes on.
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

  // Sends `c` and reads the response. Never throws for the SUT's misbehaviour.
  StepOutcome run(const Case& c);

  // Requests answered by the current process (the next request's id).
  std::int64_t next_id() const { return next_id_; }

 private:
  // A fresh process; the handshake must be the first one's, byte for byte.
  std::optional<std::string> restart();

  std::string command_;
  double timeout_seconds_;
  std::unique_ptr<Channel> channel_;
  Handshake handshake_;
  std::string handshake_line_;
  std::int64_t next_id_ = 0;
};

}  // namespace infonce::sut
