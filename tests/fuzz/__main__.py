"""python -m tests.fuzz --minutes N [--seed S] [--out DIR]: a fuzzing campaign.

Writes DIR/summary.json, DIR/summary.txt and DIR/repros/ (minimal repro per distinct bug:
.onnx + .npz feeds + one-line .txt + .json details); prints the text summary.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .campaign import Campaign, render


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="campaign length (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="first case seed (default 0)")
    parser.add_argument("--out", default="fuzz-out", help="output directory (default fuzz-out)")
    parser.add_argument("--shrink-seconds", type=float, default=45.0,
                        help="time budget to shrink each new failure (default 45)")
    parser.add_argument("--relay-every", type=int, default=4,
                        help="one Relay program per this many cases (0: none; default 4)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds before a case counts as a hang (default 60)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-failure lines")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    campaign = Campaign(args.seed, out, args.shrink_seconds, args.relay_every, args.timeout, log)
    summary = campaign.run(args.minutes)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    text = render(summary)
    (out / "summary.txt").write_text(text)
    sys.stdout.write(text)
    failures = summary["mismatches"] + summary["crashes"] + summary["hangs"] + summary["rejected"]
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
