"""The slow exhaustive model run: all nine light models, stored references and random weights.

    python tests/models/run_all.py
"""
import os
import sys

import pytest

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(pytest.main(["-q", "-m", "", "-p", "no:cacheprovider", here]))
