"""Launch files and the ``robot-grpo`` command (the composition root)."""
