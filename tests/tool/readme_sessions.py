#!/usr/bin/env python3
"""Runs the README's example sessions and checks that each exits as the README says.

A session is a fenced block whose lines start with `$ ` (a command, joined with
its backslash continuations); the lines after it, up to the next `$ `, are its
output. A command's claimed exit status is:
  - N, when the next command is `echo $?` or `echo ${PIPESTATUS[0]}` and its output is N
    (that echo line is then a claim, not a command);
  - N, for a line in a sh block that ends in `# exit N`;
  - 0 otherwise.
A shown output line that is not `...` and not elided must appear in the real output, in
order (a line that the README cuts with `...` in the middle is matched up to it).

Commands run in order, in one scratch directory that holds a copy of corpus/ and an empty
docs/, with `build/infonce-sim` and `infonce-sim` (PATH) both the binary under test, so a
session that writes (corpus/found, s0.json) changes nothing in the checkout. A command
that needs something this machine lacks is skipped with a message: a checkout under ~/src
(the ms-swift session), or mpirun.

Usage: readme_sessions.py README BINARY SOURCE_DIR
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

TIMEOUT_S = 600
EXIT_COMMENT = re.compile(r"\s+# exit (\d+)\s*$")
ECHO_STATUS = re.compile(r"^echo \$(\?|\{PIPESTATUS\[0\]\})$")


@dataclass
class Example:
    line: int  # 1-based line in the README
    command: str
    exit_status: int = 0
    output: list[str] = field(default_factory=list)
    pipe_status: bool = False  # the claim is ${PIPESTATUS[0]}: the pipeline's first command


def join_continuations(lines: list[str], start: int) -> tuple[str, int]:
    """The command starting at lines[start], with its backslash continuations; next index."""
    text = lines[start]
    i = start + 1
    while text.endswith("\\") and i < len(lines):
        text = text[:-1] + " " + lines[i].strip()
        i += 1
    return text, i


def parse_examples(readme: list[str]) -> list[Example]:
    examples: list[Example] = []
    in_block = False
    language = ""
    i = 0
    while i < len(readme):
        line = readme[i]
        if line.startswith("```"):
            in_block = not in_block
            language = line[3:].strip() if in_block else ""
            i += 1
            continue
        if in_block and line.startswith("$ "):
            start = i
            command, i = join_continuations(readme, i)
            command = command[2:]
            echo = ECHO_STATUS.match(command)
            if echo and examples:
                examples[-1].exit_status = int(readme[i].strip())
                examples[-1].pipe_status = echo.group(1) != "?"
                i += 1
                continue
            example = Example(line=start + 1, command=command)
            while i < len(readme) and not readme[i].startswith(("$ ", "```")):
                example.output.append(readme[i])
                i += 1
            examples.append(example)
            continue
        if in_block and language == "sh":
            command, next_i = join_continuations(readme, i)
            match = EXIT_COMMENT.search(command)
            if match:
                examples.append(Example(line=i + 1, command=command[: match.start()].strip(),
                                        exit_status=int(match.group(1))))
            i = next_i
            continue
        i += 1
    return examples


def skip_reason(command: str) -> str | None:
    if "~/src/" in command:
        return "needs a checkout under ~/src (not part of this repository)"
    if command.startswith("mpirun") and shutil.which("mpirun") is None:
        return "mpirun not installed"
    return None


def missing_output(shown: list[str], actual: str) -> str | None:
    """The first shown line not found, in order, in the actual output."""
    actual_lines = actual.splitlines()
    position = 0
    for line in shown:
        text = line.rstrip()
        if not text or text.strip() == "...":
            continue
        prefix = text.split("...")[0].rstrip() if "..." in text else text
        if not prefix.strip():
            continue
        while position < len(actual_lines) and not actual_lines[position].startswith(prefix):
            position += 1
        if position == len(actual_lines):
            return text
        position += 1
    return None


def make_scratch(source_dir: str, binary: str) -> str:
    scratch = tempfile.mkdtemp(prefix="readme-sessions-")
    shutil.copytree(os.path.join(source_dir, "corpus"), os.path.join(scratch, "corpus"))
    os.makedirs(os.path.join(scratch, "docs"))
    os.makedirs(os.path.join(scratch, "build"))
    os.symlink(os.path.abspath(binary), os.path.join(scratch, "build", "infonce-sim"))
    return scratch


def run(example: Example, scratch: str) -> tuple[int, str]:
    env = dict(os.environ)
    env["PATH"] = os.path.join(scratch, "build") + os.pathsep + env.get("PATH", "")
    command = example.command
    if example.pipe_status:
        command += "\nexit ${PIPESTATUS[0]}"
    done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT_S, check=False)
    return done.returncode, done.stdout


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: readme_sessions.py README BINARY SOURCE_DIR", file=sys.stderr)
        return 2
    readme_path, binary, source_dir = argv[1:]
    with open(readme_path, encoding="utf-8") as f:
        readme = f.read().splitlines()
    examples = parse_examples(readme)
    if not examples:
        print(f"readme_sessions: no example found in {readme_path}", file=sys.stderr)
        return 2
    scratch = make_scratch(source_dir, binary)
    failures = 0
    skipped = 0
    try:
        for example in examples:
            where = f"README line {example.line}: {example.command[:100]}"
            reason = skip_reason(example.command)
            if reason:
                print(f"SKIP  {where} ({reason})")
                skipped += 1
                continue
            status, output = run(example, scratch)
            if status != example.exit_status:
                failures += 1
                tail = "\n    ".join(output.splitlines()[-5:])
                print(f"FAIL  {where}\n  exit {status}, the README says {example.exit_status}"
                      f"\n    {tail}")
                continue
            missing = missing_output(example.output, output)
            if missing is not None:
                failures += 1
                print(f"FAIL  {where}\n  the README shows a line the command does not print:"
                      f"\n    {missing}")
                continue
            print(f"PASS  {where} (exit {status})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    passed = len(examples) - failures - skipped
    print(f"README examples: {passed} as the README says, {failures} not, {skipped} skipped"
          f" (of {len(examples)})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
