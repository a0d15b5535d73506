"""The robot runtime: the fixed-rate control loop, safety filter, inference backends, policy package, tick log.

Robot-side: numpy, pyserial, onnxruntime / tensorrt, yaml and the stdlib only (never torch, MuJoCo, gymnasium,
stable-baselines3, robot_grpo or envs; ``tests/deploy/runtime/test_import_isolation.py`` checks it). This
``__init__`` imports nothing, so ``import deploy.runtime.safety`` does not load onnxruntime.

Entry point: ``deploy.runtime.loop.Controller``.
"""
