"""The `relayjit` command: compile, run, bench, profile, inspect, serve and demo ONNX models.

With --json, inspect, run, bench and profile print one JSON object on stdout and nothing else
there (progress and notes stay on stderr); each command's help lists the object's keys.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import sys

from compiler.errors import CompilerError
from . import bench, demo, profile, run, serve
from . import compile as compile_command, inspect as inspect_command
from .common import CliError

SUBCOMMANDS = (compile_command, run, bench, profile, inspect_command, demo, serve)


def _version() -> str:
    try:
        return importlib.metadata.version("relayjit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="relayjit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"relayjit {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CliError as err:
        print(f"relayjit: error: {err}", file=sys.stderr)
        return 2
    except (CompilerError, ValueError, KeyError, TypeError) as err:
        print(f"relayjit: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # a file the command reads or writes
        where = f": {err.filename}" if err.filename else ""
        print(f"relayjit: error: {err.strerror or err}{where}", file=sys.stderr)
        return 1
