"""Pass instruments: hooks around every pass run (timing, IR dumps, skipping), as TVM's
tvm.ir.instrument; the pass infrastructure (compiler.transform) calls them."""
from __future__ import annotations

import inspect
import time
from typing import NamedTuple


class PassInstrument:
    """Base class of instruments; every hook is a no-op and should_run says yes."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when a PassContext holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when that PassContext is exited (or the instrument is overridden)."""

    def should_run(self, mod, info) -> bool:
        """False skips the pass (never one the PassContext requires)."""
        return True

    def run_before_pass(self, mod, info) -> None:
        """Called just before a pass that will run."""

    def run_after_pass(self, mod, info) -> None:
        """Called just after a pass ran, with its result."""


def pass_instrument(pi_cls=None):
    """Class decorator: make a plain class with some of the hooks a PassInstrument."""
    def wrap(cls):
        if not inspect.isclass(cls):
            raise TypeError(f"pass_instrument decorates a class, got {type(cls).__name__}")
        if issubclass(cls, PassInstrument):
            return cls
        wrapped = type(cls.__name__, (cls, PassInstrument), {"__doc__": cls.__doc__,
                                                             "__module__": cls.__module__})
        wrapped.__qualname__ = cls.__qualname__
        return wrapped
    if pi_cls is not None:
        return wrap(pi_cls)
    return wrap


class _Profile:
    __slots__ = ("name", "start", "total", "children")

    def __init__(self, name: str):
        self.name = name
        self.start = time.perf_counter()
        self.total = 0.0
        self.children: list[_Profile] = []


class PassProfile(NamedTuple):
    """One timed pass run: its name, seconds, and the passes it ran inside it."""

    name: str
    seconds: float
    children: tuple[PassProfile, ...]


class PassTimingInstrument(PassInstrument):
    """Times every pass (nested passes under their parent); render() gives the table."""

    def __init__(self):
        self._roots: list[_Profile] = []
        self._stack: list[_Profile] = []

    def enter_pass_ctx(self) -> None:
        self._roots, self._stack = [], []

    def exit_pass_ctx(self) -> None:
        self._roots, self._stack = [], []

    def run_before_pass(self, mod, info) -> None:
        profile = _Profile(info.name)
        (self._stack[-1].children if self._stack else self._roots).append(profile)
        self._stack.append(profile)

    def run_after_pass(self, mod, info) -> None:
        profile = self._stack.pop()
        profile.total = time.perf_counter() - profile.start

    def profiles(self) -> list[PassProfile]:
        """The finished pass runs, outermost first, each with its nested runs."""
        def freeze(root: _Profile) -> PassProfile:
            done: dict[int, PassProfile] = {}
            work = [(root, False)]
            while work:  # post-order without recursion
                prof, expanded = work.pop()
                if expanded:
                    done[id(prof)] = PassProfile(prof.name, prof.total,
                                                 tuple(done[id(c)] for c in prof.children))
                else:
                    work.append((prof, True))
                    work.extend((c, False) for c in prof.children)
            return done[id(root)]
        return [freeze(p) for p in self._roots if p not in self._stack]

    def render(self) -> str:
        """One line per pass run: total and self time in us, share of the parent; "" if none."""
        if not self._roots:
            return ""
        lines = [f"{'pass':<44} {'total(us)':>12} {'self(us)':>12} {'% parent':>9}"]
        grand = sum(p.total for p in self._roots) or 1e-12
        work = [(p, 0, grand) for p in reversed(self._roots)]
        while work:
            prof, depth, parent_total = work.pop()
            self_time = prof.total - sum(c.total for c in prof.children)
            share = 100.0 * prof.total / (parent_total or 1e-12)
            label = ("  " * depth + prof.name)[:44]
            lines.append(f"{label:<44} {prof.total * 1e6:>12.1f} {self_time * 1e6:>12.1f} "
                         f"{share:>8.2f}%")
            work.extend((c, depth + 1, prof.total) for c in reversed(prof.children))
        return "\n".join(lines)


class PrintBeforeAll(PassInstrument):
    """Prints each pass's name and the module it is about to transform (TVM's PrintBeforeAll)."""

    def run_before_pass(self, mod, info) -> None:
        print(f"Before Running Pass: {info.name}\n{mod}")


class PrintAfterAll(PassInstrument):
    """Prints each pass's name and the module it produced (TVM's PrintAfterAll)."""

    def run_after_pass(self, mod, info) -> None:
        print(f"After Running Pass: {info.name}\n{mod}")
