"""Deploy side: export (torch -> ONNX -> fp16/int8/TensorRT) and the robot runtime.

This package's ``__init__`` imports nothing, so ``deploy.runtime`` and ``deploy.contract`` load without torch.
"""
