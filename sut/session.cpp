#include "sut/session.hpp"

#include "base/assert.hpp"
#include "base/error.hpp"
#include "casefile/case_json.hpp"

namespace infonce::sut {
namespace {

// Reads the first line of a fresh channel: the handshake or a one-line reason.
std::string read_handshake_line(Channel& channel) {
  try {
    return channel.read_line();
  } catch (const ChannelFault& fault) {
    throw ProtocolError(std::string("handshake: none came: ") + fault.what());
  }
}

}  // namespace

Session::Session(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds) {
  try {
    channel_ = std::make_unique<Channel>(command_, timeout_seconds_);
    handshake_line_ = read_handshake_line(*channel_);
    handshake_ = parse_handshake(handshake_line_);
  } catch (const std::runtime_error& e) {  // ProtocolError, ChannelFault
    channel_.reset();
    throw InputError("--sut: " + std::string(e.what()));
  }
}

std::optional<std::string> Session::restart() {
  channel_.reset();
  next_id_ = 0;
  try {
    auto channel = std::make_unique<Channel>(command_, timeout_seconds_);
    const std::string line = read_handshake_line(*channel);
    if (line != handshake_line_) {
      return "the restarted SUT sent another handshake: " + shown_line(line);
    }
    channel_ = std::move(channel);
    return std::nullopt;
  } catch (const std::runtime_error& e) {
    return std::string("restarting the SUT failed: ") + e.what();
  }
}

StepOutcome Session::run(const Case& c) {
  if (in_flight_ && in_flight_->claimed) {
    settle();
    StepOutcome outcome = std::move(*in_flight_->outcome);
    in_flight_.reset();
    return outcome;
  }
  if (in_flight_) settle();  // kept for the claim() of its own case
  if (!channel_ || !channel_->alive()) {
    if (auto problem = restart()) return {std::nullopt, *problem, true};
  }
  const std::int64_t id = next_id_++;
  std::string line;
  try {
    line = channel_->request(encode_request(id, c, handshake_.supports));
  } catch (const ChannelFault& fault) {
    channel_.reset();
    return {std::nullopt, std::string(fault.what()), true};
  }
  return outcome_of(line, id, c);
}

StepOutcome Session::outcome_of(const std::string& line, std::int64_t id, const Case& c) {
  try {
    Response response = parse_response(line, id, c);
    if (!response.declined.empty()) return {std::nullopt, {}, false, response.declined};
    if (!response.result) return {std::nullopt, "the SUT reported an error: " + response.error};
    return {std::move(response.result), {}};
  } catch (const OutOfStep& e) {
    // Junk, or another request's answer: the SUT is restarted.
    channel_.reset();
    return {std::nullopt, std::string("malformed response: ") + e.what(), true};
  } catch (const ProtocolError& e) {
    // A wrong shape is still an answer: the SUT keeps running.
    return {std::nullopt, std::string("malformed response: ") + e.what()};
  }
}

void Session::send_ahead(const Case& c) {
  post(c, false);
}

void Session::start(const Case& c) {
  post(c, true);
}

void Session::post(const Case& c, bool claimed) {
  INFONCE_ASSERT(!in_flight_);
  // A SUT that is down is restarted by the run() that needs it.
  if (!channel_ || !channel_->alive()) return;
  InFlight request{next_id_++, case_to_json(c), c, claimed, std::nullopt};
  channel_->post(encode_request(request.id, request.case_json, handshake_.supports));
  in_flight_ = std::move(request);
}

bool Session::claim(const Case& c) {
  if (!in_flight_) return false;
  INFONCE_ASSERT(!in_flight_->claimed);
  if (case_to_json(c) == in_flight_->case_json) {
    in_flight_->claimed = true;
    return true;
  }
  settle();  // its response must not be read as another request's
  in_flight_.reset();
  return false;
}

void Session::settle() {
  INFONCE_ASSERT(in_flight_);
  if (in_flight_->outcome) return;
  if (!channel_ || !channel_->alive()) {  // ended while this was on its way
    in_flight_->outcome = StepOutcome{std::nullopt, "the SUT ended before answering", true};
    return;
  }
  try {
    in_flight_->outcome = outcome_of(channel_->read_line(), in_flight_->id, in_flight_->c);
  } catch (const ChannelFault& fault) {
    channel_.reset();
    in_flight_->outcome = StepOutcome{std::nullopt, std::string(fault.what()), true};
  }
}

}  // namespace infonce::sut
