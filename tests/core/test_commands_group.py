"""`accel` commands from the ``accel.commands`` entry-point group: third-party ones plug in the way
accel's own do, a broken one is one warning line, and --help works at every level."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, build_parser, main
from accel.cli._parser import CORE_COMMANDS
from accel.cli.commands import ENTRY_POINT_GROUP, Command

OWN = {"bill", "cdi", "conformance", "dra", "exporter", "job", "k8s", "ray", "router", "sched", "serve", "slurm"}

HELLO = '''
import argparse
from accel.cli.commands import Command, CommandContext, open_session

def _arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    parser.add_argument("--greeting", default="hello", help="what to say to each device")
    context.add_selection_arguments(parser)

def _run(args: argparse.Namespace) -> int:
    with open_session(args) as session:
        for device in session.inventory().devices:
            print(args.greeting, device.id)
    return 3 if args.greeting == "three" else 0

COMMAND = Command(help="greet every device", add_arguments=_arguments, run=_run)
'''


def _dist(root: Path, dist: str, entries: dict[str, str], modules: dict[str, str]) -> None:
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    for name, source in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))
    importlib.invalidate_caches()


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("accel: warning:")]


def test_accels_own_commands_come_from_the_group() -> None:
    from importlib.metadata import entry_points

    own = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert set(own) >= OWN, "pip install -e . refreshes the entry points"
    assert not OWN & CORE_COMMANDS
    for name in OWN:
        module, _, attr = own[name].partition(":")
        assert isinstance(getattr(importlib.import_module(module), attr), Command), name
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) >= CORE_COMMANDS | OWN


def test_a_third_party_command_runs_and_has_help(fake_entry_points: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _dist(fake_entry_points, "accel-fake-hello", {"hello": "accel_fake_hello:COMMAND"}, {"accel_fake_hello": HELLO})
    code, out, err = _main(capsys, "--help")
    assert code == EXIT_OK and err == ""
    assert any(line.split()[:2] == ["hello", "greet"] for line in out.splitlines()), out
    code, out, err = _main(capsys, "hello", "--help")
    assert code == EXIT_OK and "--greeting" in out and "--sim PROFILE" in out, out
    code, out, err = _main(capsys, "hello", "--sim", "dgx-h100", "--greeting", "hi")
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert len(lines) == 8 and all(line.startswith("hi nvidia:") for line in lines), out
    assert _main(capsys, "hello", "--sim", "dgx-h100", "--greeting", "three")[0] == 3
    code, out, err = _main(capsys, "hello", "--nosuch")
    assert code == EXIT_USAGE and err.startswith("accel: error: unrecognized arguments: --nosuch")
    # The top-level help before the command's name: the list of commands, each with its help line.
    code, out, err = _main(capsys, "-h", "hello")
    assert code == EXIT_OK and any(line.split()[:2] == ["hello", "greet"] for line in out.splitlines()), out
    assert any(line.split()[:2] == ["sched", "the"] for line in out.splitlines()), out


def test_a_command_whose_import_raises_is_one_warning(
    fake_entry_points: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _dist(fake_entry_points, "accel-fake-broken", {"broken": "accel_fake_broken:COMMAND"},
          {"accel_fake_broken": "raise RuntimeError('libbroken.so: cannot open shared object file')\n"})
    code, out, err = _main(capsys, "--help")
    assert code == EXIT_OK and "sched" in out and "broken" not in out
    (warning,) = _warnings(err)
    assert "'broken'" in warning and "accel-fake-broken 0.1" in warning and "libbroken.so" in warning
    assert err.count("\n") == 1
    # Another command neither loads nor mentions it.
    code, out, err = _main(capsys, "ls", "--sim", "dgx-h100")
    assert code == EXIT_OK and err == ""
    code, out, err = _main(capsys, "sched", "--help")
    assert code == EXIT_OK and err == ""
    # Running it is one error line.
    code, out, err = _main(capsys, "broken")
    assert code == EXIT_ERROR and out == ""
    assert err.startswith("accel: error: command 'broken' of accel-fake-broken 0.1") and err.count("\n") == 1
    assert "Traceback" not in err


def test_a_command_that_is_not_a_command_or_cannot_build_its_arguments(
    fake_entry_points: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_args = '''
    from accel.cli.commands import Command

    def _arguments(parser, context):
        raise KeyError("no such option table")

    COMMAND = Command(help="cannot build its parser", add_arguments=_arguments, run=lambda args: 0)
    '''
    _dist(fake_entry_points, "accel-fake-odd",
          {"notacommand": "accel_fake_odd:COMMAND", "badargs": "accel_fake_badargs:COMMAND"},
          {"accel_fake_odd": "COMMAND = 'hello'\n", "accel_fake_badargs": bad_args})
    code, out, err = _main(capsys, "--help")
    assert code == EXIT_OK and "notacommand" not in out
    (warning,) = _warnings(err)
    assert "'notacommand'" in warning and "is a str, not an accel.cli.commands.Command" in warning
    # The full parser (the CLI reference) leaves out the one whose arguments fail, with a warning.
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert "badargs" not in sub.choices and "notacommand" not in sub.choices
    assert all(a.dest != "badargs" for a in sub._choices_actions)
    err = capsys.readouterr().err
    assert len(_warnings(err)) == 2 and "failed to build its arguments: KeyError" in err
    code, out, err = _main(capsys, "badargs")
    assert code == EXIT_ERROR and "failed to build its arguments" in err and err.count("\n") == 1


def test_a_third_party_cannot_take_a_core_or_an_own_name(
    fake_entry_points: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _dist(fake_entry_points, "accel-fake-squatter",
          {"ls": "accel_fake_hello:COMMAND", "sched": "accel_fake_hello:COMMAND"}, {"accel_fake_hello": HELLO})
    code, out, err = _main(capsys, "--help")
    assert code == EXIT_OK
    warnings = _warnings(err)
    assert len(warnings) == 2, err
    assert any("'ls'" in w and "is a core accel command" in w for w in warnings)
    assert any("'sched'" in w and "accel's own is used" in w for w in warnings)
    code, out, err = _main(capsys, "sched", "--help")
    assert code == EXIT_OK and "journal" in out and "--greeting" not in out


def _every_command_path(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _every_command_path(sub, (*path, name))


def test_help_works_for_every_command_and_sub_command(capsys: pytest.CaptureFixture[str]) -> None:
    paths = list(_every_command_path(build_parser()))
    assert ("conformance", "run") in paths and ("sched", "bill") in paths and ("k8s", "extender") in paths
    for path in paths:
        code, out, err = _main(capsys, *path, "--help")
        assert code == EXIT_OK and err == "", (path, err)
        assert out.startswith(f"usage: {' '.join(('accel', *path))}"), (path, out[:200])


_NO_EXTRAS = (
    "import sys\n"
    "sys.modules['numpy'] = sys.modules['pytest'] = sys.modules['prometheus_client'] = None  # no extras\n"
    "from accel.cli import main\n"
    "argv = sys.argv[1:]\n"
    "print('EXIT', main(argv))\n"
)


@pytest.mark.parametrize(
    ("argv", "extra", "shown"),
    [
        (["sched", "--help"], "accel-sdk[scheduler]", "history"),
        (["sched", "bill", "--help"], None, "--at S"),
        (["conformance", "--help"], "accel-sdk[conformance]", "matrix"),
        (["conformance", "run", "--help"], None, "--backend"),
        (["k8s", "extender", "--help"], "accel-sdk[scheduler]", "--scorer"),
        (["exporter", "--help"], "accel-sdk[exporter]", "{serve,rules}"),
    ],
)
def test_help_without_the_optional_extra(argv: list[str], extra: str | None, shown: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _NO_EXTRAS, *argv], capture_output=True, text=True, timeout=60)
    assert proc.stdout.rstrip().endswith("EXIT 0") and proc.stderr == "", proc.stderr
    assert shown in proc.stdout
    if extra is not None:
        assert f"pip install '{extra}'" in proc.stdout


@pytest.mark.parametrize(
    ("argv", "missing", "extra"),
    [
        (["sched", "jobs", "--journal", "x.db"], "numpy", "accel-sdk[scheduler]"),
        (["conformance", "run", "--backend", "sim"], "pytest", "accel-sdk[conformance]"),
        (["k8s", "extender", "--port", "0"], "numpy", "accel-sdk[scheduler]"),
    ],
)
def test_running_without_the_optional_extra_says_what_to_install(argv: list[str], missing: str, extra: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _NO_EXTRAS, *argv], capture_output=True, text=True, timeout=60)
    assert proc.stdout.rstrip().endswith(f"EXIT {EXIT_USAGE}"), proc.stdout + proc.stderr
    assert proc.stderr == f"accel: error: accel {' '.join(argv[:2]) if argv[0] == 'k8s' else argv[0]} needs " \
        f"'{missing}', which is not installed: pip install '{extra}'\n"


def test_a_core_command_loads_no_group_command() -> None:
    code = (
        "import sys, json\n"
        "from accel.cli import main\n"
        "assert main(['ls', '--sim', 'dgx-h100', '--json']) == 0\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(proc.stderr))
    for heavy in ("accel.cli._builtin", "accel.integrations.k8s", "accel.integrations.exporter", "accel.exporter",
                  "accel.scheduler",
                  "accel.conformance", "numpy", "pytest", "prometheus_client"):
        assert heavy not in loaded, heavy


def test_the_command_list_loads_no_command_implementation() -> None:
    code = (
        "import sys, json, io, contextlib\n"
        "from accel.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded = set(json.loads(proc.stdout))
    assert "accel.cli._builtin" in loaded  # the help lines
    for heavy in ("pydantic", "accel.model", "accel.discovery", "accel.integrations", "accel.exporter",
                  "accel.scheduler", "accel.conformance", "numpy", "pytest", "prometheus_client"):
        assert heavy not in loaded, heavy


def test_sched_options_match_the_schedulers_own_parser() -> None:
    """accel sched declares the scheduler CLI's options itself (so its --help needs no numpy)."""
    from accel.scheduler.queueing.cli import add_arguments

    def shape(parser: argparse.ArgumentParser) -> dict[str, list[tuple[tuple[str, ...], str]]]:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return {
            name: sorted((tuple(a.option_strings), a.dest) for a in p._actions if a.dest != "help")
            for name, p in sub.choices.items()
        }

    theirs = argparse.ArgumentParser()
    add_arguments(theirs)
    ours = build_parser(["sched"])
    (top,) = [a for a in ours._actions if isinstance(a, argparse._SubParsersAction)]
    assert shape(top.choices["sched"]) == shape(theirs)
