"""robot_grpo: GRPO with hindsight relabelling for goal-conditioned control (torch + stable-baselines3).

Works on any gymnasium goal env that offers ``env.unwrapped.snapshot()`` and ``reset(options={"snapshot": s})``;
imports neither ``envs`` nor ``deploy``.
"""
