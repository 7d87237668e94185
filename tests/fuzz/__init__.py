"""Differential fuzzing of relayjit: random valid ONNX graphs and Relay programs.

    generate.py, graph.py        seeded random ONNX cases of 3-15 nodes, valid by construction
    ops_math/reduce/shape/nn.py  the op templates (shapes, dtypes, opset-dependent attributes)
    ops_control.py               If and Loop (outer-scope reads, run-time trip counts)
    reference.py                 onnx.reference with its known defects patched: the oracle
    oracle.py                    one case through the reference, relayjit at opt_level 0 and 3,
                                 on the VM as generated and with dynamic dims (dynamic.py),
                                 and onnxruntime; the verdict and the tolerances
    relay_fuzz.py                random Relay programs under random pass pipelines
    worker.py, runner.py         cases run in a worker process (crash and hang safe)
    shrink.py                    a failing graph shrunk to a minimal repro
    campaign.py, __main__.py     python -m tests.fuzz --minutes N [--seed S] [--out DIR]
    test_fuzz.py                 the bounded fixed-seed batch of the default pytest run and one
                                 regression test per bug found (repros/)
"""
