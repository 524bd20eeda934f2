#include "sut/channel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/assert.hpp"

namespace infonce::sut {
namespace {

using Clock = std::chrono::steady_clock;

// A write to a SUT that has just died must be an error code, not a signal
// that ends the harness: SIGPIPE is ignored process-wide, once.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = SIG_IGN;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPIPE, &action, nullptr);
  });
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  INFONCE_ASSERT(flags >= 0);
  INFONCE_ASSERT(fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// In the forked child: only async-signal-safe calls until exec.
[[noreturn]] void exec_child(const char* command, int in, int out, int err) {
  setpgid(0, 0);
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(SIGPIPE, &action, nullptr);
  if (dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
    _exit(127);
  // Every other descriptor of the harness was opened O_CLOEXEC.
  execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
  _exit(127);
}

std::string one_line(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return text;
}

}  // namespace

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "wait status " + std::to_string(status);
}

Channel::Channel(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds) {
  INFONCE_ASSERT(timeout_seconds_ > 0);
  start();
}

Channel::~Channel() {
  close();
}

void Channel::start() {
  ignore_sigpipe();
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw ChannelFault(ChannelFault::Kind::exited, "pipe failed");
  if (pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw ChannelFault(ChannelFault::Kind::exited, "pipe failed");
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    throw ChannelFault(ChannelFault::Kind::exited, "pipe failed");
  }
  const pid_t pid = fork();
  if (pid == 0) exec_child(command_.c_str(), in[0], out[1], err[1]);
  ::close(in[0]), ::close(out[1]), ::close(err[1]);
  if (pid < 0) {
    ::close(in[1]), ::close(out[0]), ::close(err[0]);
    throw ChannelFault(ChannelFault::Kind::exited, std::string("fork failed: ") + strerror(errno));
  }
  setpgid(pid, pid);  // also here: the child may not have run yet when we kill the group
  pid_ = pid;
  stdin_fd_ = in[1], stdout_fd_ = out[0], stderr_fd_ = err[0];
  set_nonblocking(stdin_fd_), set_nonblocking(stdout_fd_), set_nonblocking(stderr_fd_);
}

std::string Channel::request(const std::string& line) {
  post(line);
  return read_line();
}

void Channel::post(const std::string& line) {
  INFONCE_ASSERT(line.find('\n') == std::string::npos);
  INFONCE_ASSERT(alive());
  pending_ += line;
  pending_ += '\n';
  if (stdin_fd_ >= 0) write_pending();
}

void Channel::write_pending() {
  const ssize_t n = ::write(stdin_fd_, pending_.data(), pending_.size());
  if (n > 0) {
    pending_.erase(0, static_cast<std::size_t>(n));
  } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
    // The child closed its stdin (or died): what it says next decides.
    close_fd(stdin_fd_);
    pending_.clear();
  }
}

std::string Channel::read_line() {
  INFONCE_ASSERT(alive());
  pump(true);
  const std::size_t end = out_.find('\n');
  std::string line = out_.substr(0, end);
  out_.erase(0, end + 1);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

void Channel::pump(bool want_line) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds_));
  while (!(want_line ? out_.find('\n') != std::string::npos : pending_.empty())) {
    if (out_.size() > kMaxLineBytes) {
      kill_group();
      reap();
      throw ChannelFault(ChannelFault::Kind::exited, "a line of more than 256 MiB on stdout");
    }
    pollfd fds[3];
    nfds_t count = 0;
    const bool writing = !pending_.empty() && stdin_fd_ >= 0;
    if (writing) fds[count++] = {stdin_fd_, POLLOUT, 0};
    const nfds_t out_at = count;
    fds[count++] = {stdout_fd_, POLLIN, 0};
    const nfds_t err_at = count;
    if (stderr_fd_ >= 0) fds[count++] = {stderr_fd_, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) fail_timeout();
    const int ready =
        poll(fds, count, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    INFONCE_ASSERT(ready >= 0);
    if (writing && fds[0].revents != 0) write_pending();
    if (stderr_fd_ >= 0 && fds[err_at].revents != 0) read_stderr_chunk();
    if (fds[out_at].revents != 0 && !read_stdout_chunk()) fail_exited("");
  }
}

bool Channel::read_stdout_chunk() {
  char buffer[65536];
  const ssize_t n = ::read(stdout_fd_, buffer, sizeof buffer);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n == 0) return false;
  out_.append(buffer, static_cast<std::size_t>(n));
  return true;
}

void Channel::read_stderr_chunk() {
  char buffer[65536];
  const ssize_t n = ::read(stderr_fd_, buffer, sizeof buffer);
  if (n < 0) {
    if (errno != EAGAIN && errno != EINTR) close_fd(stderr_fd_);
    return;
  }
  if (n == 0) {
    close_fd(stderr_fd_);
    return;
  }
  err_line_.append(buffer, static_cast<std::size_t>(n));
  std::size_t end;
  while ((end = err_line_.find('\n')) != std::string::npos) {
    err_tail_.push_back(err_line_.substr(0, end));
    err_line_.erase(0, end + 1);
    if (err_tail_.size() > kStderrLines) err_tail_.pop_front();
  }
  // A line without an end is kept, but not without bound.
  if (err_line_.size() > 4096) err_line_.erase(0, err_line_.size() - 4096);
}

std::string Channel::stderr_tail() const {
  std::string tail;
  for (const std::string& line : err_tail_) {
    if (line.empty()) continue;
    tail += (tail.empty() ? "" : " | ") + one_line(line);
  }
  if (!err_line_.empty()) tail += (tail.empty() ? "" : " | ") + one_line(err_line_);
  return tail;
}

void Channel::fail_exited(const std::string& when) {
  // The rest of stderr (the traceback) comes after stdout's end: read it, briefly.
  const auto until = Clock::now() + std::chrono::seconds(1);
  while (stderr_fd_ >= 0 && Clock::now() < until) {
    pollfd fd{stderr_fd_, POLLIN, 0};
    if (poll(&fd, 1, 100) > 0) read_stderr_chunk();
  }
  const std::string status = reap();
  std::string message = "the SUT exited (" + status + ")" + when;
  const std::string tail = stderr_tail();
  message += tail.empty() ? "; its stderr was empty" : "; stderr: " + tail;
  throw ChannelFault(ChannelFault::Kind::exited, message);
}

void Channel::fail_timeout() {
  kill_group();
  reap();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_seconds_);
  std::string message = std::string("no response in ") + seconds + " s (--sut-timeout); killed";
  const std::string tail = stderr_tail();
  if (!tail.empty()) message += "; stderr: " + tail;
  throw ChannelFault(ChannelFault::Kind::timeout, message);
}

void Channel::kill_group() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

std::string Channel::reap() {
  INFONCE_ASSERT(pid_ > 0);
  // A grace period for a child that is exiting on its own, then the group is
  // killed while the leader is still a zombie (so its pid, the group's id,
  // cannot have been reused by then).
  siginfo_t info{};
  const auto until = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < until) {
    info.si_pid = 0;
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == pid_) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill_group();
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  close_fd(stdin_fd_), close_fd(stdout_fd_), close_fd(stderr_fd_);
  pending_.clear();
  out_.clear();
  return describe_wait_status(status);
}

void Channel::close() {
  if (pid_ <= 0) return;
  close_fd(stdin_fd_);  // end of the session: the SUT exits 0
  reap();
}

}  // namespace infonce::sut
