"""The direction arithmetic behind benchmarks/push_directions.py's table."""

import numpy as np

from benchmarks.push_directions import cosines, sector_shares


def test_cosines_measure_against_the_approach_direction_and_skip_still_blocks():
    approach = np.array([[0.1, 0.0]] * 4)  # gripper start -> block start: +x, 10 cm
    pushes = np.array(
        [
            [0.08, 0.0],  # straight on: cos 1
            [0.0, 0.06],  # sideways: cos 0
            [-0.06, -0.06],  # back and to the side: cos -0.707
            [0.0005, 0.0],  # under 1 mm: no direction
        ]
    )
    cos = cosines(pushes, approach)
    np.testing.assert_allclose(cos[:3], [1.0, 0.0, -np.sqrt(0.5)], atol=1e-12)
    assert np.isnan(cos[3])


def test_sector_shares_split_the_finite_cosines_into_the_four_sectors():
    # straight on (> 0.7), sideways + (0, 0.7], sideways - (-0.7, 0], back (<= -0.7); NaN is left out
    shares = sector_shares(np.array([1.0, 0.71, 0.5, 0.0, -0.5, -0.7, -1.0, np.nan]))
    assert shares == {"straight on": 2 / 7, "sideways +": 1 / 7, "sideways -": 2 / 7, "back": 2 / 7}
