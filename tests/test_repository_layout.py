"""The repository's shape (issue 21's floor): no Python file over 600 lines, at most 10
user-facing benchmark scripts, the architecture and contributing guides present, linked from
README.md, and every file they cite present (they are read to find code, so a path that moved
makes them wrong)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600
MAX_BENCHMARK_SCRIPTS = 10
GUIDES = ("docs/ARCHITECTURE.md", "CONTRIBUTING.md")
_SKIPPED_DIRS = {".git", "__pycache__", "build", "dist", "fuzz-out"}


def _files() -> list[Path]:
    return [p for p in ROOT.rglob("*") if p.is_file()
            and not _SKIPPED_DIRS.intersection(p.relative_to(ROOT).parts)
            and not any(part.startswith(".") or part.endswith(".egg-info")
                        for part in p.relative_to(ROOT).parts)]


FILES = _files()


def test_no_python_file_is_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in FILES if p.suffix == ".py"
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines (split them along their seams): {long}"


def test_few_user_facing_benchmark_scripts():
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    assert len(scripts) <= MAX_BENCHMARK_SCRIPTS, (
        f"{len(scripts)} scripts at the top of benchmarks/ (at most {MAX_BENCHMARK_SCRIPTS}; "
        f"one-off experiments go in benchmarks/experiments/): {scripts}")


def test_readme_links_the_guides_and_nothing_outside_the_repository():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for guide in GUIDES:
        assert (ROOT / guide).is_file(), guide
        assert guide in readme, f"README.md does not link {guide}"
    assert "../" not in readme, "README.md points outside the repository"


def cited_paths(text: str) -> list[str]:
    """The file and directory names in `code spans` of a guide (placeholders such as
    `compiler/passes/<name>.py` and globs left out)."""
    out = []
    for span in re.findall(r"`([^`\n]+)`", text):
        token = span.split("(")[0].rstrip(".,:;")
        if re.fullmatch(r"[\w./-]+", token) and ("/" in token or re.search(
                r"\.(py|md|txt|ll|toml)$", token)) and not token.startswith(("-", "http")):
            out.append(token)
    return out


def _exists(token: str, names: set[str]) -> bool:
    """A path from the root, or the tail of one (a guide may name `storage_plan.py` or
    `schedules/` inside a paragraph about its package)."""
    token = token.rstrip("/")
    return (ROOT / token).exists() or any(n == token or n.endswith("/" + token) for n in names)


def test_every_path_the_guides_cite_exists():
    names = {str(p.relative_to(ROOT)) for p in FILES}
    names |= {str(d.relative_to(ROOT)) for p in FILES for d in p.parents if d != ROOT
              and ROOT in d.parents}
    missing = {guide: [t for t in cited_paths((ROOT / guide).read_text(encoding="utf-8"))
                       if not _exists(t, names)] for guide in GUIDES}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"paths cited by the guides that do not exist: {missing}"


def test_the_path_reader_sees_what_it_should():
    text = ("`compiler/op/registry.py` (`OpDef`), `codegen/tir/`, `storage_plan.py`, "
            "`compiler/passes/<name>.py`, `python -m pytest -q`, `tests/fuzz/ops_*.py`")
    assert cited_paths(text) == ["compiler/op/registry.py", "codegen/tir/", "storage_plan.py"]
    names = {"compiler/backend/vm/storage_plan.py", "codegen/tir"}
    assert _exists("storage_plan.py", names) and _exists("tir/", names)
    assert not _exists("compiler/passes/removed_pass.py", names)
