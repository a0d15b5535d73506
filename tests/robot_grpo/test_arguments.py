"""GRPO's constructor checks: the attributes the model hands over by name are exactly the checker's keywords."""

from __future__ import annotations

import inspect

from robot_grpo.arguments import CHECKED_ARGUMENTS, check_grpo_arguments
from robot_grpo.grpo import GRPO


def test_every_checked_argument_is_a_constructor_argument_and_a_checker_keyword():
    checker = set(inspect.signature(check_grpo_arguments).parameters) - {"n_envs"}
    assert set(CHECKED_ARGUMENTS) == checker and len(CHECKED_ARGUMENTS) == len(checker)
    assert set(CHECKED_ARGUMENTS) <= set(inspect.signature(GRPO.__init__).parameters)
