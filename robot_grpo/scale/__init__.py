"""Scale-out: group rollouts on Ray actors (``DistributedGRPO``) and population training on Ray Tune (PBT).

Optional: needs the ``[cluster]`` extra (Ray). Nothing else in ``robot_grpo`` imports this package, and its
pure parts (``streams``, ``group_runner``, ``diversity``) import no Ray. Like the rest of the learning library it
imports no envs: the composition root (``launch/``) hands it env factories.
"""
