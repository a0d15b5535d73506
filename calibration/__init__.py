"""Calibration: measure the robot through its link and read/write the calibration file.

``calibration.schema`` (numpy + yaml only) is read by the sim env and by the runtime's safety filter.
"""
