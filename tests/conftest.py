"""Shared pytest setup: faulthandler on, so a crash in native code shows a Python traceback."""
import faulthandler

faulthandler.enable()
