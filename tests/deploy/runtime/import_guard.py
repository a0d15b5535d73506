"""Shared by the tests that prove the robot side runs without the training side.

``FORBID_SOURCE`` is Python source for a fresh interpreter: it installs a ``sys.meta_path`` finder that raises
ImportError for every package in ``FORBIDDEN`` (and its submodules), named in ``sys.argv[1]`` comma-separated.
"""

import textwrap

FORBIDDEN = ("torch", "mujoco", "gymnasium", "stable_baselines3", "robot_grpo", "envs")

FORBID_SOURCE = textwrap.dedent(
    """
    import sys

    FORBIDDEN = set(sys.argv[1].split(","))

    class Forbid:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in FORBIDDEN:
                raise ImportError(f"forbidden on the robot side: {name}")
            return None

    sys.meta_path.insert(0, Forbid())
    """
)
