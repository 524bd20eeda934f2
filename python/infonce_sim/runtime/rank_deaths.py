"""What a dead rank process left behind, said in one line.

A rank killed by a signal (a SIGSEGV or SIGABRT inside c10d/gloo, the OOM killer's SIGKILL)
prints no Python traceback of its own. Each rank therefore enables faulthandler into a
file of its own (`fault_log_path`): on a fatal signal it writes the Python stack of every
thread there, and the parent quotes that file's gist in the PoolError and copies the whole
file to its stderr, so the next crash explains itself.
"""

import os
import signal


def fault_log_path(directory, world_rank):
    return os.path.join(directory, f"rank{world_rank}.faulthandler.txt")


def exit_description(exitcode):
    """'SIGSEGV' for a process killed by signal 11, 'exit code 3' for sys.exit(3)."""
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def read_fault_log(path):
    """The file's text, or '' when the rank wrote none (or it is gone)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def last_words(text):
    """faulthandler's gist: its first line ('Fatal Python error: Segmentation fault') and the
    innermost frame of the crashing thread; a crash in a native thread (gloo's loop thread)
    has no Python frames of its own, so then the main thread's (listed last) is named."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    blocks = []  # [is the crashing thread, its frames], in faulthandler's order
    for line in lines[1:]:
        if line.startswith(("Current thread 0x", "Thread 0x")):
            blocks.append([line.startswith("Current"), []])
        elif line.startswith("File ") and blocks:
            blocks[-1][1].append(line)
    current = [frames for is_current, frames in blocks if is_current]
    if current:
        return lines[0] + (f", in {current[0][0]}" if current[0] else "")
    if blocks and blocks[-1][1]:
        return f"{lines[0]}, in a native thread; the main thread in {blocks[-1][1][0]}"
    return lines[0]
