"""Online fine-tuning on the production line: tick logs -> GRPO + EWC -> candidate package -> gate -> promotion.

The training side of the robot (torch allowed, never imported by ``deploy.runtime``):

- ``dataset``: read the runtime's tick logs and cut them into episodes for ``robot_grpo.finetune_data``;
- ``gate``: closed-loop checks a candidate must pass against the running package;
- ``promote``: the package store with atomic promotion and one-command rollback
  (``python -m deploy.finetune.promote rollback --store DIR``);
- ``round``: one fine-tuning round end to end.
"""
