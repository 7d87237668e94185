"""Differential fuzzing of relayjit: random valid ONNX graphs and Relay programs.

    generate.py / graph.py / ops_*.py   seeded random ONNX cases, valid by construction
    oracle.py                           one case through the reference, onnxruntime and
                                        relayjit at opt_level 0 and 3; verdict
    relay_fuzz.py                       random Relay programs under random pass pipelines
    worker.py / runner.py               cases run in a worker process (crash/hang safe)
    shrink.py                           a failing graph shrunk to a minimal repro
    campaign.py / __main__.py           `python -m tests.fuzz --minutes N [--seed S] [--out DIR]`
    test_fuzz.py                        the bounded fixed-seed batch the default pytest run does
"""
