"""Bad command lines: every numeric option checked, exit codes as documented (issue 14, item 5).

Each case asserts the exit code and that stderr is exactly one ``accel: error:`` line (no
traceback).  The parser walk at the end finds every numeric option of every sub-command,
including those the optional parts add, so an option added later without a range fails here.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from accel.cli import EXIT_ERROR, EXIT_NO_DEVICES, EXIT_OK, EXIT_USAGE, build_parser, main
from accel.cli._options import MAX_DIGITS, number

HUGE = "9" * 5000  # past Python's 4300-digit integer-string limit


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("accel: error: "), err
    assert "Traceback" not in err
    return lines[0]


SIM = ("--sim", "dgx-h100")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        # --timeout: nan and inf crashed, 0 silently became 10 s
        (["ls", *SIM, "--timeout", "nan"], "argument --timeout: must be a finite number of seconds > 0"),
        (["ls", *SIM, "--timeout", "inf"], "got 'inf'"),
        (["ls", *SIM, "--timeout=-inf"], "got '-inf'"),  # "-inf" alone reads as an option to argparse
        (["ls", *SIM, "--timeout", "0"], "seconds > 0 and <= 86400, got '0'"),
        (["ls", *SIM, "--timeout", "0.0"], "got '0.0'"),
        (["ls", *SIM, "--timeout", "-1"], "got '-1'"),
        (["ls", *SIM, "--timeout", "1e999"], "got '1e999'"),
        (["ls", *SIM, "--timeout", "86400.5"], "<= 86400, got '86400.5'"),
        (["ls", *SIM, "--timeout", "ten"], "got 'ten'"),
        (["ls", *SIM, "--timeout", ""], "got ''"),
        (["ls", *SIM, "--timeout", HUGE], f"({len(HUGE)} characters)"),
        (["topo", *SIM, "--timeout", "nan"], "argument --timeout"),
        (["health", *SIM, "--timeout", "nan"], "argument --timeout"),
        (["plugins", "--timeout", "nan"], "argument --timeout"),
        (["show", "0", *SIM, "--timeout", "inf"], "argument --timeout"),
        (["dra", *SIM, "--timeout", "0"], "argument --timeout"),
        # watch: --interval inf crashed, nan was accepted
        (["watch", *SIM, "--interval", "inf"], "argument --interval: must be a finite number of seconds >= 0"),
        (["watch", *SIM, "--interval", "nan"], "got 'nan'"),
        (["watch", *SIM, "--interval", "-0.5"], "got '-0.5'"),
        (["watch", *SIM, "--interval", "1e9"], "<= 86400"),
        (["watch", *SIM, "--count", "-1"], "argument --count: must be a whole number of refreshes >= 0"),
        (["watch", *SIM, "--count", "1.5"], "got '1.5'"),
        (["watch", *SIM, "--count", "1e3"], "got '1e3'"),
        (["watch", *SIM, "--count", "0x10"], "got '0x10'"),
        (["watch", *SIM, "--count", "nan"], "got 'nan'"),
        (["watch", *SIM, "--count", "١٢"], "whole number"),  # Arabic-Indic digits: int() takes them, we do not
        (["watch", *SIM, "--count", HUGE], "(5000 characters)"),
        (["watch", *SIM, "--count", "10000000000"], "<= 1000000000 (0: until interrupted)"),
        # bugreport --max-bytes
        (["bugreport", "--out", "x", "--max-bytes", "0"], "argument --max-bytes: must be a whole number of bytes > 0"),
        (["bugreport", "--out", "x", "--max-bytes", "1e3"], "got '1e3'"),
        (["bugreport", "--out", "x", "--max-bytes", HUGE], "(5000 characters)"),
        (["bugreport", "--out", "x", "--max-bytes", str(2**40 + 1)], "<= 1099511627776"),
        # sched bill --at
        (["sched", "bill", "--at", "nan"], "argument --at: must be a finite number of seconds of journal time >= 0"),
        (["sched", "bill", "--at", "-1"], "got '-1'"),
        (["sched", "bill", "--at", "inf"], "got 'inf'"),
        # an empty value that would silently mean something else
        (["ls", "--sim", ""], "argument --sim: needs a profile name"),
        (["ls", "--sim", "  "], "argument --sim: needs a profile name"),
        (["ls", "--replay", ""], "argument --replay: needs a directory"),
        (["ls", "--sysfs", ""], "argument --sysfs: needs a directory"),
        (["ls", "--backend", ""], "argument --backend/-b: needs a backend name"),
        (["bugreport", "--out", ""], "argument --out: needs a directory"),
        (["dra", *SIM, "--node", ""], "argument --node: needs a node name"),
        (["dra", *SIM, "--domain", ""], "argument --domain: needs a domain name"),
        (["show", "", *SIM], "needs a device id"),
    ],
)
def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == EXIT_USAGE, err
    line = one_error_line(err)
    assert needle in line, line
    assert len(line) < 300  # a 5,000-digit value is not echoed whole
    assert out == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["ls", *SIM, "--timeout", "0.5"],
        ["ls", *SIM, "--timeout", "86400"],
        ["ls", *SIM, "--timeout", "1e1"],
        ["ls", *SIM, "--timeout", " 3 "],
        ["watch", *SIM, "--count", "1", "--interval", "0"],
        ["watch", *SIM, "--count", "+2", "--interval", ".01"],
        ["show", "0", *SIM],
    ],
)
def test_good_values_still_work(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == EXIT_OK, err
    assert out


def test_timeout_is_honoured_not_replaced(capsys: pytest.CaptureFixture[str]) -> None:
    # The simulator's hung tool answers after the timeout: 0.1 s is used as given (it was 10 s for "0").
    code, _, err = run(capsys, "ls", *SIM, "-o", "faults=hung_tool", "--timeout", "0.1")
    assert code == EXIT_ERROR and "0.1" in one_error_line(err)


@pytest.mark.parametrize("key", [HUGE, "1" + "0" * 20, "²", "-1", "0x1"])
def test_show_with_an_absurd_index_is_one_line(capsys: pytest.CaptureFixture[str], key: str) -> None:
    """A 5,000-digit index crashed on Python's integer-string limit; '²' is a digit to str.isdigit."""
    code, out, err = run(capsys, "show", *SIM, key)
    assert code == EXIT_ERROR and out == ""
    line = one_error_line(err)
    assert "no device" in line and "`accel ls` lists the ids" in line and len(line) < 300


def test_show_by_position_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", *SIM, "7", "--json")
    assert code == EXIT_OK and '"id"' in out


def test_empty_sim_profile_is_2_not_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "ls", "--sim", "")
    assert code == EXIT_USAGE and code != EXIT_NO_DEVICES
    one_error_line(err)


@pytest.mark.parametrize("command", [["ls"], ["topo"], ["health"], ["show", "0"], ["watch", "--count", "1"], ["dra"]])
def test_accel_sim_unknown_profile_is_2_not_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("ACCEL_SIM", "nosuch")
    monkeypatch.delenv("ACCEL_BACKENDS", raising=False)
    code, out, err = run(capsys, *command)
    assert code == EXIT_USAGE, err
    line = one_error_line(err)
    assert "unknown simulator profile 'nosuch'" in line
    assert out == ""


@pytest.mark.parametrize("backend", ["ascend", "metax", "kunlunxin"])
def test_unknown_replay_scenario_is_2_not_3(capsys: pytest.CaptureFixture[str], backend: str) -> None:
    code, out, err = run(capsys, "ls", "--backend", backend, "-o", "scenario=nosuch")
    assert code == EXIT_USAGE, err
    line = one_error_line(err)
    assert "unknown replay scenario 'nosuch'" in line and "shipped:" in line
    assert out == ""


def test_accel_sim_known_profile_and_empty_value(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACCEL_BACKENDS", raising=False)
    monkeypatch.setenv("ACCEL_SIM", "dgx-h100")
    assert run(capsys, "ls")[0] == EXIT_OK
    # --sim wins over the variable, also over a bad one
    monkeypatch.setenv("ACCEL_SIM", "nosuch")
    assert run(capsys, "ls", *SIM)[0] == EXIT_OK


# -- every numeric option of every sub-command ----------------------------------------------------


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _walk(sub, (*path, name))
        else:
            yield path, action


def _numeric() -> list[tuple[tuple[str, ...], argparse.Action]]:
    found = []
    for path, action in _walk(build_parser()):  # no command line: every command, in full
        if action.type is int or action.type is float:
            raise AssertionError(f"{' '.join(path)} {action.option_strings}: a bare type={action.type.__name__}")
        if getattr(action.type, "__name__", "") in ("number", "integer"):
            found.append((path, action))
    return found


def _name(action: argparse.Action) -> str:
    """How argparse names ``action`` in an error: its option strings, or a positional's metavar."""
    return "/".join(action.option_strings) or str(action.metavar or action.dest)


def _argv(path: tuple[str, ...], action: argparse.Action, value: str) -> list[str]:
    """The command line that gives ``action`` the value ``value``: ``--opt=value``, or for a
    positional, a placeholder for each positional before it, then ``--`` (so ``-inf`` is a value)."""
    if action.option_strings:
        return [*path, f"{action.option_strings[0]}={value}"]
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    before = []
    for other in parser._actions:
        if other is action:
            break
        if not other.option_strings and not isinstance(other, argparse._SubParsersAction):
            before.append("placeholder")
    return [*path, *before, "--", value]


def test_every_numeric_option_is_found() -> None:
    names = {(" ".join(path), _name(action)) for path, action in _numeric()}
    # the options as of this writing; a new one is picked up by the next test automatically
    assert {
        ("ls", "--timeout"),
        ("watch", "--count"),
        ("watch", "--interval"),
        ("bugreport", "--max-bytes"),
        ("sched bill", "--at"),
        ("job serving scale", "REPLICAS"),
    } <= names


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", HUGE, "", "x"])
def test_every_numeric_option_rejects_non_finite_and_garbage(capsys: pytest.CaptureFixture[str], value: str) -> None:
    for path, action in _numeric():
        option = _name(action)
        code, out, err = run(capsys, *_argv(path, action, value))
        assert code == EXIT_USAGE and out == "", (path, option, err)
        line = one_error_line(err)
        assert f"argument {option}: must be a " in line, line
        assert len(line) < 300


def test_the_factory_names_the_unit_and_range() -> None:
    parse = number(unit="watts", minimum=0, maximum=1000)
    assert parse("12.5") == 12.5
    with pytest.raises(
        argparse.ArgumentTypeError, match=r"^must be a finite number of watts >= 0 and <= 1000, got 'nan'$"
    ):
        parse("nan")
    count = number(integer=True, unit="devices", minimum=1)
    assert count("3") == 3 and isinstance(count("3"), int)
    with pytest.raises(argparse.ArgumentTypeError, match=r"whole number of devices >= 1, got '0'"):
        count("0")
    with pytest.raises(argparse.ArgumentTypeError, match=rf"\.\.\. \({MAX_DIGITS + 1} characters\)"):
        count("1" * (MAX_DIGITS + 1))
