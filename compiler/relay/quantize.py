"""relay.quantize: quantize a float program to QNN ops on calibration data, as TVM's
relay.quantize (quantize, qconfig, current_qconfig, QConfig)."""
from compiler.driver.quantize import QConfig, current_qconfig, qconfig, quantize  # noqa: F401
