"""infonce-sim from Python: check a loss, replay a saved case, classify a trainer.

    import infonce_sim
    result = infonce_sim.check("my_adapter:make", cases=200, seed=1)
    assert result.passed, result.summary()

Every function runs the `infonce-sim` CLI as a subprocess, and the CLI runs the adapter in its
own worker subprocess (`python -m infonce_sim.worker`, docs/sut-protocol.md): a crash of the
code under test is a failed case, never a crash of the engine, and the reverse.

An adapter is given as one of:

- a `"module:function"` string (or a built-in name: `"conformance"`, `"ms-swift"`,
  `"open-clip"`): the worker imports the module and calls `function(**options)`;
- a factory function or class defined at the top level of an importable module: the same,
  by its `module:name`;
- an adapter object: it is pickled into a file the worker unpickles. The worker gets a copy
  (state changed there does not come back), and its class must be importable;
- a worker command (a string with spaces, or a list of arguments): run as it is, for a worker
  of your own (any language that speaks infonce-sut/1).

The worker imports with the caller's `sys.path`: the entries a fresh interpreter would not
have (the project's directories, not the environment's own) go into its PYTHONPATH, relative
to the working directory where they lie under it, so the printed reproduce command stays short.
"""

from __future__ import annotations

import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

Adapter = Union[str, Sequence[str], Any]

# The built-in adapters of `python -m infonce_sim.worker --adapter NAME`.
BUILT_IN_ADAPTERS = ("conformance", "ms-swift", "open-clip")


class InfonceSimError(RuntimeError):
    """infonce-sim could not run the check (bad usage, no CLI, an adapter that cannot load):
    not a verdict about the loss."""


@dataclass(frozen=True)
class Failure:
    """The first failing case of a campaign, shrunk."""

    case_index: Optional[int]
    properties: list[str]  # "property: detail", one per failed property
    shrunk: str  # the shrunk case in one line
    original: str  # the case as generated, in one line
    case_file: Optional[Path]  # the saved shrunk case (None with no corpus directory)
    reproduce: str  # the one command that reproduces the failure
    reproduce_commands: list[str]  # every reproduce command the engine printed


@dataclass(frozen=True)
class CheckResult:
    """What `check` found."""

    passed: bool
    verdict: str  # one line: "PASSED: ..." or "FAILED at case I (...): property: detail"
    seed: Any
    cases: int  # cases run
    failure: Optional[Failure]
    report: dict  # the engine's JSON report (docs: `check --report FILE.json`)
    report_paths: list[Path]
    output: str  # the engine's human-readable output
    command: list[str]  # the CLI command that ran
    sut_command: str  # the worker command (--sut)

    def summary(self) -> str:
        """The verdict, the shrunk case and the reproduce command: three lines."""
        if self.failure is None:
            return self.verdict
        return "\n".join([self.verdict, f"shrunk case: {self.failure.shrunk}",
                          f"reproduce:   {self.failure.reproduce}"])


@dataclass(frozen=True)
class ReplayResult:
    """What `replay` found on one saved case."""

    passed: bool
    case_file: Path
    output: str
    command: list[str]
    sut_command: str
    failed_properties: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CorpusReplayResult:
    """What `replay_corpus` found on a directory of saved cases."""

    passed: bool
    directory: Path
    passed_files: list[str]
    failed: list[str]  # one line per failing file: "FAIL  FILE  the SUT fails ...: detail"
    outside: int  # files outside what the adapter's handshake supports
    output: str
    command: list[str]
    sut_command: str

    @property
    def count(self) -> int:
        return len(self.passed_files) + len(self.failed) + self.outside


@dataclass(frozen=True)
class ClassifyResult:
    """What `infonce-sim classify` printed about a trainer."""

    output: str
    returncode: int
    report: Optional[Any]  # its output parsed as JSON, when it is JSON
    command: list[str]


def find_cli() -> str:
    """The `infonce-sim` CLI: $INFONCE_SIM, else the one beside this Python (a venv's bin/,
    where `pip install` puts it), else the first on PATH."""
    explicit = os.environ.get("INFONCE_SIM")
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "infonce-sim"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("infonce-sim")
    if found:
        return found
    raise InfonceSimError(
        "no infonce-sim CLI: install it (`pip install .` in an infonce-sim checkout builds it "
        "into this environment, or the .deb), or point INFONCE_SIM at one")


def _worker_pythonpath(cwd: Path) -> list[str]:
    """sys.path entries a fresh interpreter lacks: not the environment's own directories,
    nor site directories (the same interpreter adds them, and their .pth files, itself)."""
    own = {Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                                       sys.base_exec_prefix}}
    entries: list[str] = []
    for entry in sys.path:
        path = Path(entry or os.getcwd()).resolve()
        if not path.is_dir() or path.name in ("site-packages", "dist-packages") or \
                any(path == p or p in path.parents for p in own):
            continue
        try:
            text = str(path.relative_to(cwd)) if path != cwd else "."
        except ValueError:
            text = str(path)
        if text not in entries:
            entries.append(text)
    return entries


def _importable_name(obj: Any) -> Optional[str]:
    """"module:name" for a top-level function or class of an importable module, else None."""
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None)
    if not module or not name or module == "__main__" or "." in name or "<" in name:
        return None
    if getattr(sys.modules.get(module), name, None) is not obj:
        return None
    return f"{module}:{name}"


def load_pickled(path: str, **_options: Any) -> Any:
    """The worker's factory for an adapter object passed to `check` in memory."""
    with open(path, "rb") as f:
        return pickle.load(f)


def sut_command(adapter: Adapter, *, runtime: str = "inprocess",
                options: Optional[Mapping[str, Any]] = None, cwd: Optional[Path] = None,
                scratch: Optional[Path] = None) -> str:
    """The `--sut` command that runs `adapter` (see the module's docstring)."""
    cwd = (cwd or Path.cwd()).resolve()
    if isinstance(adapter, (list, tuple)):
        return shlex.join(str(a) for a in adapter)
    if isinstance(adapter, str) and (" " in adapter.strip() or "/" in adapter.split(":")[0]):
        return adapter
    if isinstance(adapter, str):
        spec = adapter
        if spec not in BUILT_IN_ADAPTERS and ":" not in spec:
            raise InfonceSimError(f"adapter {spec!r}: expected module:function, a built-in "
                                  f"adapter ({', '.join(BUILT_IN_ADAPTERS)}) or a worker command")
    elif callable(adapter) and _importable_name(adapter):
        spec = _importable_name(adapter)
    elif hasattr(adapter, "supports") and (hasattr(adapter, "loss") or
                                           hasattr(adapter, "clip_loss")):
        scratch = scratch or Path(tempfile.mkdtemp(prefix="infonce-sim-"))
        path = scratch / "adapter.pickle"
        try:
            path.write_bytes(pickle.dumps(adapter))
        except Exception as e:  # noqa: BLE001 - pickle raises several kinds
            raise InfonceSimError(
                f"adapter {adapter!r} cannot be pickled for the worker ({e}): pass its "
                "factory as 'module:function' instead") from e
        spec = f"{__name__}:load_pickled"
        options = dict(options or {}, path=str(path))
    else:
        raise InfonceSimError(
            f"adapter {adapter!r}: expected 'module:function', a top-level factory of an "
            "importable module, an adapter object (supports, loss) or a worker command")
    parts = [sys.executable, "-m", "infonce_sim.worker", "--adapter", spec,
             "--runtime", runtime]
    for key, value in (options or {}).items():
        parts += ["--option", f"{key}={value}"]
    command = shlex.join(parts)
    pythonpath = _worker_pythonpath(cwd)
    if pythonpath:
        command = f"PYTHONPATH={shlex.quote(os.pathsep.join(pythonpath))} {command}"
    return command


def _run(command: list[str], cwd: Path, timeout: Optional[float]) -> subprocess.CompletedProcess:
    # The progress bar reaches a terminal only: stderr is passed through when it is one.
    quiet = not sys.stderr.isatty() or bool(os.environ.get("CI"))
    try:
        return subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE if quiet else None, text=True,
                              timeout=timeout, check=False)
    except FileNotFoundError as e:
        raise InfonceSimError(f"cannot run {command[0]}: {e}") from e


def _raise_unless_verdict(done: subprocess.CompletedProcess, command: list[str]) -> None:
    if done.returncode in (0, 1):
        return
    tail = "\n".join((done.stderr or "").strip().splitlines()[-20:])
    raise InfonceSimError(f"{shlex.join(command)} exited {done.returncode}"
                          + (f":\n{tail}" if tail else ""))


def _verdict_line(output: str, fallback: str) -> str:
    for line in output.splitlines():
        if line.startswith(("PASSED", "FAILED")):
            return line.strip()
    return fallback


def _failure(report: dict, cwd: Path) -> Optional[Failure]:
    failure = report.get("failure")
    if not failure:
        return None
    reproduce = list(failure.get("reproduce", []))
    case_file = failure.get("case_file")
    # A saved case replays without regenerating the campaign: prefer that command.
    by_file = [c for c in reproduce if case_file and case_file in c]
    return Failure(
        case_index=failure.get("case_index"),
        properties=[f"{f['property']}: {f['detail']}" for f in failure.get("failures", [])],
        shrunk=failure.get("shrunk", ""),
        original=failure.get("original", ""),
        case_file=(cwd / case_file) if case_file else None,
        reproduce=(by_file or reproduce or [""])[0],
        reproduce_commands=reproduce,
    )


def check(adapter: Adapter, *, cases: Optional[int] = None, seed: Union[int, str, None] = None,
          strategy: Optional[str] = None, runtime: str = "inprocess",
          time_budget: Optional[str] = None, jobs: Union[int, str] = 1,
          restrict: Sequence[str] = (), options: Optional[Mapping[str, Any]] = None,
          corpus_dir: Union[str, Path, None] = None, report_dir: Union[str, Path, None] = None,
          reports: Sequence[str] = (), cwd: Union[str, Path, None] = None,
          timeout: Optional[float] = None) -> CheckResult:
    """Run a property campaign on `adapter`'s loss: `infonce-sim check --sut ...`.

    cases, seed, time_budget, jobs: the campaign (the CLI's defaults when None: seed 1, 1000
    cases). strategy: `--strategies` (a point such as "autograd/local/scale-P/mean", or
    "all"). runtime: "inprocess" (virtual ranks, deterministic) or "ddp" (real gloo DDP).
    restrict: `--restrict AXIS=VALUE` entries. options: the adapter factory's keyword
    arguments. corpus_dir: where the shrunk failure is saved (None: not saved). report_dir:
    where the JSON report (and `reports`, e.g. "campaign.html") go (None: a new temporary
    directory, kept). cwd: the engine's working directory (paths in the reproduce command are
    relative to it). Raises InfonceSimError when the check could not run.
    """
    cwd = Path(cwd or Path.cwd()).resolve()
    report_dir = Path(report_dir) if report_dir else Path(tempfile.mkdtemp(prefix="infonce-sim-"))
    report_dir = report_dir if report_dir.is_absolute() else cwd / report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    sut = sut_command(adapter, runtime=runtime, options=options, cwd=cwd, scratch=report_dir)
    json_report = report_dir / "report.json"
    paths = [json_report] + [report_dir / name for name in reports]
    command = [find_cli(), "check", "--sut", sut]
    if seed is not None:
        command += ["--seed", str(seed)]
    if cases is not None:
        command += ["--cases", str(cases)]
    if time_budget is not None:
        command += ["--time-budget", time_budget]
    if strategy is not None:
        command += ["--strategies", strategy]
    command += ["--jobs", str(jobs)]
    for entry in restrict:
        command += ["--restrict", entry]
    command += ["--corpus-dir", str(corpus_dir)] if corpus_dir is not None else ["--no-corpus"]
    for path in paths:
        command += ["--report", str(path)]
    done = _run(command, cwd, timeout)
    _raise_unless_verdict(done, command)
    try:
        report = json.loads(json_report.read_text())
    except (OSError, ValueError) as e:
        raise InfonceSimError(f"{shlex.join(command)}: no readable report ({e})") from e
    failure = _failure(report, cwd)
    passed = done.returncode == 0 and failure is None
    verdict = _verdict_line(done.stdout, "PASSED" if passed else "FAILED")
    if failure is not None:
        verdict = f"{verdict}: {'; '.join(failure.properties)}"
    return CheckResult(passed=passed, verdict=verdict, seed=report.get("seed"),
                       cases=int(report.get("tally", {}).get("cases_run", 0)),
                       failure=failure, report=report, report_paths=paths,
                       output=done.stdout, command=command, sut_command=sut)


def replay(case_file: Union[str, Path], adapter: Adapter, *, runtime: str = "inprocess",
           options: Optional[Mapping[str, Any]] = None, cwd: Union[str, Path, None] = None,
           timeout: Optional[float] = None) -> ReplayResult:
    """Check one saved case file on `adapter`'s loss: `infonce-sim replay FILE --sut ...`."""
    cwd = Path(cwd or Path.cwd()).resolve()
    sut = sut_command(adapter, runtime=runtime, options=options, cwd=cwd)
    command = [find_cli(), "replay", str(case_file), "--sut", sut]
    done = _run(command, cwd, timeout)
    _raise_unless_verdict(done, command)
    failed = [line.strip() for line in done.stdout.splitlines()
              if line.startswith("  ") and not line.strip().startswith("sut:")]
    return ReplayResult(passed=done.returncode == 0, case_file=Path(case_file),
                        output=done.stdout, command=command, sut_command=sut,
                        failed_properties=failed if done.returncode else [])


def replay_corpus(directory: Union[str, Path], adapter: Adapter, *, runtime: str = "inprocess",
                  options: Optional[Mapping[str, Any]] = None,
                  cwd: Union[str, Path, None] = None,
                  timeout: Optional[float] = None) -> CorpusReplayResult:
    """Check every saved case file under `directory` on `adapter`'s loss, with one worker:
    `infonce-sim corpus replay DIR --sut ...`."""
    cwd = Path(cwd or Path.cwd()).resolve()
    sut = sut_command(adapter, runtime=runtime, options=options, cwd=cwd)
    command = [find_cli(), "corpus", "replay", str(directory), "--sut", sut]
    done = _run(command, cwd, timeout)
    _raise_unless_verdict(done, command)
    lines = done.stdout.splitlines()
    passed_files = [line.split()[1] for line in lines if line.startswith("PASS ")]
    failed = [line.strip() for line in lines if line.startswith("FAIL ")]
    outside = sum(1 for line in lines if line.startswith(("OUTSIDE", "SKIP")))
    return CorpusReplayResult(passed=done.returncode == 0 and not failed,
                              directory=Path(directory), passed_files=passed_files,
                              failed=failed, outside=outside, output=done.stdout,
                              command=command, sut_command=sut)


def classify(adapter: Adapter, *, runtime: str = "inprocess",
             options: Optional[Mapping[str, Any]] = None, cwd: Union[str, Path, None] = None,
             timeout: Optional[float] = None) -> ClassifyResult:
    """Ask the engine which strategy point a trainer's loss implements:
    `infonce-sim classify --sut ...`. Needs an infonce-sim that has the `classify` command;
    with an older one it raises InfonceSimError saying so."""
    cwd = Path(cwd or Path.cwd()).resolve()
    cli = find_cli()
    probe = subprocess.run([cli, "classify", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, check=False)
    if probe.returncode != 0 and "unknown command" in probe.stdout:
        version = subprocess.run([cli, "--version"], stdout=subprocess.PIPE, text=True,
                                 check=False).stdout.strip()
        raise InfonceSimError(f"{cli} ({version}) has no `classify` command: classify needs "
                              "a newer infonce-sim")
    sut = sut_command(adapter, runtime=runtime, options=options, cwd=cwd)
    command = [cli, "classify", "--sut", sut]
    done = _run(command, cwd, timeout)
    _raise_unless_verdict(done, command)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    return ClassifyResult(output=done.stdout, returncode=done.returncode, report=report,
                          command=command)
