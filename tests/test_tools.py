"""Tests for accel.tools: real subprocesses for the runner, recorded runs for the replayer."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from accel import tools
from accel.errors import (
    ConfigError,
    ReplayMissingError,
    ToolError,
    ToolExitError,
    ToolNotExecutableError,
    ToolNotFoundError,
    ToolOutputTooLargeError,
    ToolTimeoutError,
)
from accel.tools import (
    Recording,
    RecordingRunner,
    ReplayRunner,
    Runner,
    SubprocessRunner,
    ToolResult,
    _running,
    run,
    which,
)

FIXTURES = Path(__file__).parent / "fixtures" / "tools"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def make_tool(directory: Path, name: str, body: str, *, mode: int = 0o755) -> Path:
    """Write a ``#!/bin/sh`` script called ``name`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return path


def make_py_tool(directory: Path, name: str, code: str) -> Path:
    """Write a Python script called ``name`` (run by this interpreter) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!{sys.executable}\n{code}")
    path.chmod(0o755)
    return path


def is_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie (killed, not yet reaped by init) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X")


def wait_until(predicate: Callable[[], bool], within_s: float = 2.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def read_pid(path: Path) -> int:
    assert wait_until(lambda: path.exists() and path.read_text().strip() != ""), f"{path} never written"
    return int(path.read_text().strip())


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    return d


# --------------------------------------------------------------------------------------------
# run(): the real runner
# --------------------------------------------------------------------------------------------


def test_success_captures_stdout_stderr_and_metadata(bindir: Path) -> None:
    make_tool(bindir, "vtool", 'echo "out $1"\necho "err $2" >&2\n')
    result = run(["vtool", "a b", "c"], search_path=[str(bindir)], timeout_s=5)
    assert result == ToolResult(
        argv=("vtool", "a b", "c"),
        stdout="out a b\n",
        stderr="err c\n",
        returncode=0,
        duration_s=result.duration_s,
    )
    assert 0 <= result.duration_s < 5
    assert result.tool == "vtool"
    assert result.check() is result


def test_result_is_frozen() -> None:
    result = ToolResult(argv=("x",), stdout="", stderr="", returncode=0, duration_s=0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.stdout = "changed"  # type: ignore[misc]


def test_absolute_path_is_run_directly(bindir: Path) -> None:
    tool = make_tool(bindir, "vtool", "echo abs\n")
    assert run([str(tool)]).stdout == "abs\n"


def test_child_sees_argv0_as_written(bindir: Path) -> None:
    make_py_tool(bindir, "vtool", "import sys\nprint(sys.argv[0])\n")
    # A Python script sees its own path; what matters is that run() does not rewrite argv.
    result = run(["vtool"], search_path=[str(bindir)])
    assert result.argv == ("vtool",)
    assert result.stdout.strip() == str(bindir / "vtool")


def test_nonzero_exit_raises_with_returncode_and_stderr_tail(bindir: Path) -> None:
    make_tool(bindir, "vtool", 'echo "partial table"\necho "dcmi error -8005: device busy" >&2\nexit 3\n')
    with pytest.raises(ToolExitError) as info:
        run(["vtool", "info"], search_path=[str(bindir)])
    err = info.value
    assert err.returncode == 3
    assert "device busy" in err.stderr
    assert err.tool == "vtool"
    assert err.argv == ("vtool", "info")
    assert "status 3" in str(err) and "device busy" in str(err)


def test_check_false_returns_result_and_check_raises_later(bindir: Path) -> None:
    make_tool(bindir, "vtool", "echo 'Error: card id 9 is invalid'\nexit 255\n")
    result = run(["vtool"], search_path=[str(bindir)], check=False)
    assert result.returncode == 255
    assert "invalid" in result.stdout
    with pytest.raises(ToolExitError) as info:
        result.check()
    # stderr is empty, so the message shows the stdout tail instead (tools that report on stdout).
    assert "card id 9 is invalid" in str(info.value)


def test_killed_by_signal_is_named(bindir: Path) -> None:
    make_tool(bindir, "vtool", "kill -KILL $$\n")
    with pytest.raises(ToolExitError) as info:
        run(["vtool"], search_path=[str(bindir)])
    assert info.value.returncode == -9
    assert "SIGKILL" in str(info.value)


def test_long_stderr_is_tailed_on_the_error(bindir: Path) -> None:
    make_py_tool(bindir, "vtool", "import sys\nsys.stderr.write('x' * 100000 + 'THE END')\nsys.exit(1)\n")
    with pytest.raises(ToolExitError) as info:
        run(["vtool"], search_path=[str(bindir)])
    assert info.value.stderr.endswith("THE END")
    assert len(info.value.stderr) < 10000
    assert len(str(info.value)) < 1000


def test_not_found_says_where_it_looked(bindir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent-a:/nonexistent-b")
    with pytest.raises(ToolNotFoundError) as info:
        run(["no-such-vendor-tool"], search_path=[str(bindir)])
    message = str(info.value)
    assert str(bindir) in message and "/nonexistent-a" in message
    assert info.value.tool == "no-such-vendor-tool"
    assert info.value.argv == ("no-such-vendor-tool",)


def test_absolute_path_not_found(tmp_path: Path) -> None:
    with pytest.raises(ToolNotFoundError, match="no such file"):
        run([str(tmp_path / "npu-smi"), "info"])


def test_not_executable(bindir: Path) -> None:
    tool = make_tool(bindir, "vtool", "echo hi\n", mode=0o644)
    with pytest.raises(ToolNotExecutableError) as info:
        run(["vtool"], search_path=[str(bindir)])
    assert str(tool) in str(info.value)
    with pytest.raises(ToolNotExecutableError):
        run([str(tool)])
    with pytest.raises(ToolNotExecutableError, match="not a regular file"):
        run([str(bindir)])


def test_exec_format_error_is_not_executable(bindir: Path) -> None:
    tool = bindir / "vtool"
    tool.write_bytes(b"\x00\x01\x02 not a program")
    tool.chmod(0o755)
    with pytest.raises(ToolNotExecutableError, match="exec format"):
        run([str(tool)])


def test_missing_interpreter_is_not_found(bindir: Path) -> None:
    tool = bindir / "vtool"
    tool.write_text("#!/nonexistent/interpreter\n")
    tool.chmod(0o755)
    with pytest.raises(ToolNotFoundError, match="interpreter"):
        run([str(tool)])


def test_timeout_kills_the_whole_process_group(bindir: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    make_tool(bindir, "hung-smi", 'sleep 30 &\necho "$$ $!" > "$1"\nsleep 30\n')
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as info:
        run(["hung-smi", str(pids)], search_path=[str(bindir)], timeout_s=0.5)
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 3.0
    message = str(info.value)
    assert "hung-smi" in message and "0.5s" in message and str(pids) in message
    assert info.value.argv == ("hung-smi", str(pids))
    assert wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    child, grandchild = (int(p) for p in pids.read_text().split())
    assert wait_until(lambda: not is_alive(child))
    assert wait_until(lambda: not is_alive(grandchild)), "the grandchild survived the timeout"


def test_descendant_holding_the_pipes_counts_as_a_hang(bindir: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    make_tool(bindir, "vtool", 'sleep 30 &\necho $! > "$1"\necho done\nexit 0\n')
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError, match="kept its output open"):
        run(["vtool", str(pidfile)], search_path=[str(bindir)], timeout_s=0.5)
    assert time.monotonic() - start < 3.0
    grandchild = read_pid(pidfile)
    assert wait_until(lambda: not is_alive(grandchild))


def test_interrupt_while_running_kills_the_group(
    bindir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = tmp_path / "pid"
    make_tool(bindir, "vtool", 'sleep 30 &\necho $! > "$1"\nsleep 30\n')

    def interrupted(*args: object) -> object:
        read_pid(pidfile)
        raise KeyboardInterrupt

    monkeypatch.setattr(_running, "_pump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(["vtool", str(pidfile)], search_path=[str(bindir)], timeout_s=5)
    grandchild = read_pid(pidfile)
    assert wait_until(lambda: not is_alive(grandchild))


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_over_the_cap_kills_and_raises(bindir: Path, stream: str) -> None:
    make_py_tool(
        bindir,
        "spam-smi",
        f"import sys\nwhile True:\n    sys.{stream}.buffer.write(b'x' * 65536)\n    sys.{stream}.flush()\n",
    )
    start = time.monotonic()
    with pytest.raises(ToolOutputTooLargeError) as info:
        run(["spam-smi"], search_path=[str(bindir)], max_output_bytes=1_000_000, timeout_s=5)
    assert time.monotonic() - start < 3.0
    assert "1000000" in str(info.value)
    assert info.value.tool == "spam-smi"


def test_output_exactly_at_the_cap_is_fine(bindir: Path) -> None:
    make_py_tool(
        bindir, "vtool", "import sys\nsys.stdout.buffer.write(b'y' * 4000)\nsys.stderr.write('z' * 96)\n"
    )
    result = run(["vtool"], search_path=[str(bindir)], max_output_bytes=4096)
    assert len(result.stdout) == 4000 and len(result.stderr) == 96


def test_environment_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_TEST_UNRELATED_SECRET", "leaked")
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("LC_ALL", "zh_CN.UTF-8")
    result = run(["env"], env={"ASCEND_VISIBLE_DEVICES": "0,1"})
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen["LANG"] == "C"
    assert seen["LC_ALL"] == "C"
    assert seen["PATH"] == os.environ["PATH"]
    assert seen["ASCEND_VISIBLE_DEVICES"] == "0,1"
    assert "ACCEL_TEST_UNRELATED_SECRET" not in seen
    assert set(seen) <= {"PATH", "HOME", "LANG", "LC_ALL", "ASCEND_VISIBLE_DEVICES"}


def test_env_overrides_defaults_and_its_path_is_used_for_lookup(bindir: Path) -> None:
    make_tool(bindir, "vtool", 'echo "$LANG"\n')
    result = run(["vtool"], env={"PATH": f"{bindir}:/usr/bin:/bin", "LANG": "en_US.UTF-8"})
    assert result.stdout == "en_US.UTF-8\n"


def test_garbage_bytes_are_replaced_not_fatal(bindir: Path) -> None:
    make_py_tool(
        bindir,
        "gbk-smi",
        "import sys\n"
        "sys.stdout.buffer.write(b'\\xce\\xc2\\xb6\\xc8 34\\xe2\\x84\\x83 \\xff ok\\n')\n"
        "sys.stderr.buffer.write(b'\\xd6\\xd0\\xce\\xc4\\n')\n",
    )
    result = run(["gbk-smi"], search_path=[str(bindir)])
    assert "\ufffd" in result.stdout
    assert "34\u2103" in result.stdout  # valid UTF-8 (the degree-Celsius sign) survives
    assert result.stdout.endswith(" ok\n")
    assert "\ufffd" in result.stderr


def test_stdin_is_devnull() -> None:
    start = time.monotonic()
    result = run(["cat"], timeout_s=5)
    assert result.stdout == ""
    assert time.monotonic() - start < 3.0


def test_cwd(bindir: Path, tmp_path: Path) -> None:
    make_tool(bindir, "vtool", "pwd\n")
    work = tmp_path / "work"
    work.mkdir()
    assert run(["vtool"], search_path=[str(bindir)], cwd=work).stdout.strip() == str(work)
    with pytest.raises(ConfigError, match="not a directory"):
        run(["vtool"], search_path=[str(bindir)], cwd=tmp_path / "missing")


def test_search_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = tmp_path / "on-path"
    vendor_a = tmp_path / "opt-a"
    vendor_b = tmp_path / "opt-b"
    make_tool(on_path, "vtool", "echo from-PATH\n")
    make_tool(vendor_b, "vtool", "echo from-b\n")
    monkeypatch.setenv("PATH", f"{on_path}:/usr/bin:/bin")
    assert run(["vtool"]).stdout == "from-PATH\n"
    assert run(["vtool"], search_path=[str(vendor_a), str(vendor_b)]).stdout == "from-b\n"
    make_tool(vendor_a, "vtool", "echo from-a\n")
    assert run(["vtool"], search_path=[str(vendor_a), str(vendor_b)]).stdout == "from-a\n"
    assert which("vtool", [str(vendor_a), str(vendor_b)]) == str(vendor_a / "vtool")
    # A non-executable candidate is skipped, like a shell does, when a usable one follows.
    (vendor_a / "vtool").chmod(0o644)
    assert run(["vtool"], search_path=[str(vendor_a)]).stdout == "from-PATH\n"


def test_empty_and_relative_path_entries_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tool(tmp_path, "vtool", "echo from-cwd\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", ":.:bin")
    with pytest.raises(ToolNotFoundError):
        run(["vtool"])
    assert which("vtool") is None


@pytest.mark.parametrize(
    ("argv", "kwargs", "match"),
    [
        ("npu-smi info", {}, "not a single string"),
        ([], {}, "empty"),
        ([""], {}, "empty"),
        (["npu-smi", "-i", 0], {}, r"argv\[2\] is int"),
        (["npu-smi", "a\0b"], {}, "NUL"),
        (["./npu-smi"], {}, "bare tool name or an absolute path"),
        (["npu-smi"], {"search_path": "/usr/local/sbin"}, "not a single string"),
        (["npu-smi"], {"search_path": ["usr/local/sbin"]}, "absolute"),
        (["npu-smi"], {"timeout_s": 0}, "timeout_s"),
        (["npu-smi"], {"timeout_s": float("inf")}, "timeout_s"),
        (["npu-smi"], {"max_output_bytes": 0}, "max_output_bytes"),
        (["npu-smi"], {"env": {"A=B": "x"}}, "invalid environment"),
        (["npu-smi"], {"env": {"A": 1}}, "str to str"),
    ],
)
def test_bad_arguments_are_config_errors(argv: object, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        run(argv, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=match):
        ReplayRunner.from_mapping({"npu-smi": "x"}).run(argv, **kwargs)  # type: ignore[arg-type]


def test_which(bindir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = make_tool(bindir, "vtool", "")
    make_tool(bindir, "plain", "", mode=0o644)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert which("vtool") is None
    assert which("vtool", [str(bindir)]) == str(tool)
    assert which(str(tool)) == str(tool)
    assert which(str(bindir / "missing")) is None
    assert which("plain", [str(bindir)]) is None
    assert SubprocessRunner().which("vtool", [str(bindir)]) == str(tool)
    with pytest.raises(ConfigError):
        which("vtool", "/opt/hyhal/bin")


def test_all_tool_errors_carry_tool_and_argv(tmp_path: Path) -> None:
    for exc_type in (ToolNotFoundError, ToolNotExecutableError, ToolTimeoutError, ToolExitError):
        assert issubclass(exc_type, ToolError)
    with pytest.raises(ToolError) as info:
        run([str(tmp_path / "gone"), "-x"])
    assert info.value.tool == "gone"
    assert info.value.argv == (str(tmp_path / "gone"), "-x")


# --------------------------------------------------------------------------------------------
# Runners
# --------------------------------------------------------------------------------------------


def test_runners_satisfy_the_protocol(tmp_path: Path) -> None:
    real = SubprocessRunner()
    assert isinstance(real, Runner)
    assert isinstance(ReplayRunner.from_mapping({}), Runner)
    assert isinstance(RecordingRunner(real, tmp_path / "rec"), Runner)


def test_subprocess_runner_counts_calls_including_failures(bindir: Path) -> None:
    make_tool(bindir, "vtool", "exit 1\n")
    runner = SubprocessRunner()
    runner.run(["true"])
    with pytest.raises(ToolExitError):
        runner.run(["vtool", "x"], search_path=[str(bindir)])
    with pytest.raises(ToolNotFoundError):
        runner.run(["no-such-vendor-tool"])
    assert runner.call_count == 3
    assert runner.calls == [("true",), ("vtool", "x"), ("no-such-vendor-tool",)]


def test_call_history_is_bounded_but_the_count_is_not() -> None:
    runner = ReplayRunner.from_mapping({"a": "", "b": "", "c": ""}, history=2)
    for name in "abc":
        runner.run([name])
    assert runner.call_count == 3
    assert runner.calls == [("b",), ("c",)]


def test_thread_safe_counting() -> None:
    replay = ReplayRunner.from_mapping({f"tool-{i}": str(i) for i in range(4)})
    real = SubprocessRunner()

    def work(n: int) -> None:
        for _ in range(50):
            assert replay.run([f"/usr/bin/tool-{n % 4}"]).stdout == str(n % 4)
        for _ in range(2):
            real.run(["true"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(work, n) for n in range(8)]:
            future.result()  # re-raises anything a worker raised
    assert replay.call_count == 400 and len(replay.calls) == 400
    assert real.call_count == 16 and real.calls == [("true",)] * 16


# --------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------


def write_json(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def test_replay_fixture_scenario() -> None:
    scenario = FIXTURES / "replay-basic"
    runner = ReplayRunner(scenario)
    result = runner.run(["/usr/local/sbin/npu-smi", "info"])
    assert result.stdout == (scenario / "samples" / "npu-smi-info.txt").read_text()
    assert result.argv == ("/usr/local/sbin/npu-smi", "info")
    assert result.returncode == 0

    with pytest.raises(ToolExitError) as info:
        runner.run(["npu-smi", "info", "-t", "board", "-i", "9"])
    assert info.value.returncode == 255
    assert "card id 9 is invalid" in str(info.value)
    assert runner.run(["npu-smi", "info", "-t", "board", "-i", "9"], check=False).returncode == 255

    start = time.monotonic()
    with pytest.raises(ToolTimeoutError, match=r"hy-smi timed out after 0\.2s"):
        runner.run(["hy-smi", "--showuse"], timeout_s=0.2)
    assert 0.15 <= time.monotonic() - start < 2.0

    assert runner.which("npu-smi") == str(scenario / "npu-smi")
    assert runner.which("hy-smi") == "/opt/hyhal/bin/hy-smi"
    assert runner.which("cnmon") is None
    assert runner.call_count == 4
    assert len(runner.recordings) == 3


def test_replay_matches_argv0_by_basename(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", {"argv": ["npu-smi", "info"], "stdout": "bare"})
    write_json(tmp_path / "b.json", {"argv": ["/usr/sbin/cnmon", "info"], "stdout": "abs"})
    runner = ReplayRunner(tmp_path)
    assert runner.run(["/usr/local/sbin/npu-smi", "info"]).stdout == "bare"
    assert runner.run(["npu-smi", "info"]).stdout == "bare"
    assert runner.run(["cnmon", "info"]).stdout == "abs"
    assert runner.run(["/opt/cnmon", "info"]).stdout == "abs"
    # Only argv[0] is reduced to its basename; the rest must match exactly.
    with pytest.raises(ReplayMissingError):
        runner.run(["npu-smi", "info", "-m"])
    with pytest.raises(ReplayMissingError):
        runner.run(["npu-smi", "/info"])


def test_replay_missing_lists_argv_directory_and_what_exists(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", {"argv": ["npu-smi", "info"], "stdout": ""})
    runner = ReplayRunner(tmp_path)
    with pytest.raises(ReplayMissingError) as info:
        runner.run(["npu-smi", "info", "-t", "usages", "-i", "0"])
    message = str(info.value)
    assert "npu-smi info -t usages -i 0" in message
    assert str(tmp_path) in message
    assert "recorded for npu-smi: npu-smi info" in message
    assert info.value.argv == ("npu-smi", "info", "-t", "usages", "-i", "0")
    with pytest.raises(ReplayMissingError, match="no recordings for cnmon"):
        runner.run(["cnmon"])
    assert runner.call_count == 2


def test_replay_stdout_file_and_stderr_file(tmp_path: Path) -> None:
    # The data files live inside the scenario directory (a sub-directory is fine); a path out
    # of it ("../vendor-samples/table.txt") is refused: tests/test_replay_confinement.py.
    scenario = tmp_path / "scenario"
    samples = scenario / "vendor-samples"
    samples.mkdir(parents=True)
    (samples / "table.txt").write_bytes(b"NPU  Name\n0    910B\xff\n")
    (samples / "warn.txt").write_text("warning: old firmware\n")
    write_json(
        scenario / "run.json",
        {
            "argv": ["npu-smi", "info"],
            "stdout_file": "vendor-samples/table.txt",
            "stderr_file": "vendor-samples/warn.txt",
        },
    )
    result = ReplayRunner(scenario).run(["npu-smi", "info"])
    assert result.stdout == "NPU  Name\n0    910B\ufffd\n"
    assert result.stderr == "warning: old firmware\n"


def test_replay_short_delay_succeeds(tmp_path: Path) -> None:
    runner = ReplayRunner.from_mapping({"slow-smi": {"stdout": "ok", "delay_s": 0.1}})
    result = runner.run(["slow-smi"], timeout_s=1.0)
    assert result.stdout == "ok"
    assert result.duration_s >= 0.09


def test_replay_enforces_the_output_cap() -> None:
    runner = ReplayRunner.from_mapping({"big-smi": "x" * 5000})
    with pytest.raises(ToolOutputTooLargeError):
        runner.run(["big-smi"], max_output_bytes=4096)
    assert runner.run(["big-smi"], max_output_bytes=5000).stdout == "x" * 5000


def test_replay_from_mapping_and_recordings() -> None:
    runner = ReplayRunner.from_mapping(
        {
            "npu-smi info -t board -i 0": "board",
            ("npu-smi", "info", "-t", "board", "-i", "1 2"): {
                "stdout": "spaced",
                "stderr": "e",
                "returncode": 0,
            },
            "npu-smi info -t board -i 9": {"returncode": 1, "stderr": "bad id"},
        }
    )
    assert runner.run(["npu-smi", "info", "-t", "board", "-i", "0"]).stdout == "board"
    spaced = runner.run(["npu-smi", "info", "-t", "board", "-i", "1 2"])
    assert (spaced.stdout, spaced.stderr) == ("spaced", "e")
    with pytest.raises(ToolExitError) as info:
        runner.run(["npu-smi", "info", "-t", "board", "-i", "9"])
    assert (info.value.returncode, info.value.stderr) == (1, "bad id")

    direct = ReplayRunner.from_recordings([Recording(argv=("cnmon", "info"), stdout="mlu")], name="unit")
    assert direct.run(["cnmon", "info"]).stdout == "mlu"
    assert "unit" in repr(direct)

    with pytest.raises(ConfigError, match="mapping key"):
        ReplayRunner.from_mapping({"x": {"argv": ["x"]}})
    with pytest.raises(ConfigError, match="stdout text or a mapping"):
        ReplayRunner.from_mapping({"x": 3})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "not a readable JSON recording"),
        ("[1, 2]", "must be a JSON object"),
        ('{"stdout": "x"}', "'argv' must be a non-empty list"),
        ('{"argv": []}', "'argv' must be a non-empty list"),
        ('{"argv": ["x", 1]}', "'argv' must be a non-empty list"),
        ('{"argv": ["x"], "stdot": "typo"}', "unknown key"),
        ('{"argv": ["x"], "stdout": "a", "stdout_file": "b"}', "not both"),
        ('{"argv": ["x"], "stdout_file": "missing.txt"}', "cannot read stdout_file"),
        ('{"argv": ["x"], "stdout": 5}', "'stdout' must be a string"),
        ('{"argv": ["x"], "returncode": "0"}', "'returncode' must be an integer"),
        ('{"argv": ["x"], "returncode": true}', "'returncode' must be an integer"),
        ('{"argv": ["x"], "delay_s": -1}', "'delay_s' must be a non-negative"),
        ('{"argv": ["x"], "comment": 5}', "'comment' has the wrong type"),
    ],
)
def test_malformed_recordings_name_the_file(tmp_path: Path, content: str, match: str) -> None:
    bad = tmp_path / "broken-recording.json"
    bad.write_text(content)
    with pytest.raises(ConfigError, match=match) as info:
        ReplayRunner(tmp_path)
    assert str(bad) in str(info.value)


def test_duplicate_recordings_are_rejected(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", {"argv": ["npu-smi", "info"]})
    write_json(tmp_path / "b.json", {"argv": ["/usr/local/sbin/npu-smi", "info"]})
    with pytest.raises(ConfigError, match="recordings must be unique") as info:
        ReplayRunner(tmp_path)
    assert "a.json" in str(info.value) and "b.json" in str(info.value)


def test_replay_directory_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ReplayRunner(tmp_path / "nope")


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------


def test_record_then_replay_round_trip(bindir: Path, tmp_path: Path) -> None:
    make_py_tool(
        bindir,
        "vendor-smi",
        "import sys\n"
        "if sys.argv[1:] == ['fail']:\n"
        "    sys.stderr.write('device 3 is lost\\n')\n"
        "    sys.exit(4)\n"
        "sys.stdout.buffer.write('温度 34℃ args=%r\\n'.encode() % sys.argv[1:])\n"
        "sys.stderr.write('note\\n')\n",
    )
    rec_dir = tmp_path / "recorded"
    inner = SubprocessRunner()
    recorder = RecordingRunner(inner, rec_dir)
    live_ok = recorder.run(["vendor-smi", "info", "-i", "0"], search_path=[str(bindir)])
    recorder.run(["vendor-smi", "info", "-i", "0"], search_path=[str(bindir)])  # same argv: one file
    with pytest.raises(ToolExitError) as live_fail:
        recorder.run(["vendor-smi", "fail"], search_path=[str(bindir)])
    with pytest.raises(ToolNotFoundError):  # runs that never completed are not recorded
        recorder.run(["no-such-vendor-tool"])
    assert recorder.call_count == 4 and inner.call_count == 4
    assert recorder.which("vendor-smi", [str(bindir)]) == str(bindir / "vendor-smi")

    files = sorted(rec_dir.glob("*.json"))
    assert len(files) == 2
    assert not list(rec_dir.glob(".recording-*"))
    first = json.loads(files[0].read_text(encoding="utf-8"))
    assert set(first) == {"argv", "returncode", "duration_s", "stderr", "stdout"}

    replay = ReplayRunner(rec_dir)
    again = replay.run([str(bindir / "vendor-smi"), "info", "-i", "0"])
    assert (again.stdout, again.stderr, again.returncode) == (live_ok.stdout, live_ok.stderr, 0)
    assert "温度 34℃" in again.stdout
    with pytest.raises(ToolExitError) as replay_fail:
        replay.run(["vendor-smi", "fail"])
    assert replay_fail.value.returncode == live_fail.value.returncode == 4
    assert replay_fail.value.stderr == live_fail.value.stderr
    assert str(replay_fail.value) == str(live_fail.value)


def test_recorder_file_names_are_safe_and_distinct(tmp_path: Path) -> None:
    inner = ReplayRunner.from_mapping({("x", "a b"): "1", ("x", "a_b"): "2", ("x", "../../etc/passwd"): "3"})
    recorder = RecordingRunner(inner, tmp_path / "rec")
    for args in (("x", "a b"), ("x", "a_b"), ("x", "../../etc/passwd")):
        recorder.run(args)
    names = [p.name for p in (tmp_path / "rec").iterdir()]
    assert len(names) == 3
    assert all("/" not in n and n.endswith(".json") and not n.startswith(".") for n in names)
    assert {r.stdout for r in ReplayRunner(tmp_path / "rec").recordings} == {"1", "2", "3"}


def test_recorder_is_thread_safe(tmp_path: Path) -> None:
    inner = ReplayRunner.from_mapping({f"tool-{i} info": f"out {i}" for i in range(6)})
    recorder = RecordingRunner(inner, tmp_path / "rec")

    def work(i: int) -> None:
        for _ in range(10):
            recorder.run([f"tool-{i}", "info"])

    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(work, i) for i in range(6)]:
            future.result()
    assert recorder.call_count == 60
    replay = ReplayRunner(tmp_path / "rec")
    assert sorted(r.stdout for r in replay.recordings) == [f"out {i}" for i in range(6)]


def test_recorder_mode_bits_do_not_matter_for_replay(tmp_path: Path) -> None:
    # Recordings are plain data: a read-only checkout must still replay.
    rec = write_json(tmp_path / "r.json", {"argv": ["x"], "stdout": "ro"})
    rec.chmod(stat.S_IRUSR)
    assert ReplayRunner(tmp_path).run(["x"]).stdout == "ro"


def test_kill_running_tools_ends_a_tool_run_by_another_thread(tmp_path: Path) -> None:
    # Discovery reads in worker threads; Ctrl-C (main thread) and exit kill their tools too.
    script = tmp_path / "hangs"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(tools.run, [str(script)], timeout_s=120)
        deadline = time.monotonic() + 10
        while not _running._RUNNING and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tools.kill_running_tools() == 1
        with pytest.raises(ToolExitError):
            future.result(timeout=10)
    assert not _running._RUNNING
    assert tools.kill_running_tools() == 0
