#include "sut/session.hpp"

#include "base/assert.hpp"
#include "base/error.hpp"

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

}  // namespace infonce::sut
