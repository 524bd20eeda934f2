// A persistent child process spoken to in lines: `/bin/sh -c CMD` in its own
// process group, with pipes on its stdin, stdout and stderr. Reads and writes
// poll() all three pipes against one deadline, so a child that stops reading,
// floods stderr or hangs can never block the harness: past the deadline the
// whole group is killed (SIGKILL) and the call throws ChannelFault.
//
// The deadline is the only clock reading in the layer (steady_clock): it
// decides whether a case is reported as a hang, never a number in a result.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <stdexcept>
#include <string>

namespace infonce::sut {

// The child exited, closed stdout, or missed the deadline. what() is one line.
class ChannelFault : public std::runtime_error {
 public:
  enum class Kind { exited, timeout };
  ChannelFault(Kind kind, const std::string& message) : std::runtime_error(message), kind(kind) {}
  Kind kind;
};

class Channel {
 public:
  static constexpr std::size_t kStderrLines = 40;  // the tail kept for reports
  static constexpr std::size_t kMaxLineBytes = std::size_t{1} << 28;

  // Starts the child. Throws ChannelFault (exited) if fork or pipe fail.
  Channel(std::string command, double timeout_seconds);
  ~Channel();  // ends the child (close(), then kills the group)
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Sends `line` + '\n' and waits for the next line of stdout (without its
  // '\n'), both within one timeout. Throws ChannelFault.
  std::string request(const std::string& line);
  // Queues `line` + '\n' and writes what the pipe takes now, without waiting:
  // the child can start on it while the caller works. The rest is written by
  // the next read_line(). Never throws: a child that is gone shows in that read.
  void post(const std::string& line);
  // The next line of stdout within the timeout (the handshake). Throws ChannelFault.
  std::string read_line();

  // Closes the child's stdin, gives it a moment to exit, then kills its group.
  void close();
  bool alive() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // The last lines the child wrote to stderr, joined with " | " (one line).
  std::string stderr_tail() const;
  const std::string& command() const { return command_; }
  double timeout_seconds() const { return timeout_seconds_; }

 private:
  void start();
  // Moves data between the pipes until a whole stdout line is buffered (or,
  // with want_line false, until `pending_` is written). Throws ChannelFault.
  void pump(bool want_line);
  void write_pending();  // one non-blocking write of `pending_`
  void read_stderr_chunk();
  bool read_stdout_chunk();  // false at EOF
  [[noreturn]] void fail_exited(const std::string& when);
  [[noreturn]] void fail_timeout();
  void kill_group();
  std::string reap();  // waits for the child; its exit status as words

  std::string command_;
  double timeout_seconds_;
  pid_t pid_ = -1;
  int stdin_fd_ = -1, stdout_fd_ = -1, stderr_fd_ = -1;
  std::string pending_;   // still to be written to stdin
  std::string out_;       // stdout read but not yet returned
  std::string err_line_;  // stderr's unfinished last line
  std::deque<std::string> err_tail_;
};

// "exit status 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

}  // namespace infonce::sut
