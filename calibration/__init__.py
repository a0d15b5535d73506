"""Calibration: measure the robot through its link (delay, gain, noise, workspace) and write its robot spec.

The spec's file form and loader live in ``deploy.robot_spec`` (beside the contract, below both this package and
the runtime); this package only measures.
"""
