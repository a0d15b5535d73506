"""What ``robot-grpo run`` records and serves besides the control loop: the MCAP tick log with the run's metadata
and attachments, the state machine's transitions fed into it as they happen, and the optional live view.

Robot side: imports the runtime only (the live view's SDK only when ``live.enabled``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from launch.schema import LaunchError

RUN_METADATA = "run"  # MCAP metadata record: what ran, on what, with which package
YAML = "application/yaml"
JSON = "application/json"


def run_metadata(config: dict[str, Any], spec: Any, spec_file: Path, package: Any) -> dict[str, dict[str, str]]:
    """The ``run`` metadata record of the tick log: strings only (MCAP metadata is a string map)."""
    robot = config["robot"]
    values = {
        "name": str(config["name"]),
        "package": str(config["package"]),
        "policy_id": package.policy_id,
        "backend": str(config["backend"]),
        "variant": str(config["variant"]),
        "robot_kind": str(robot["kind"]),
        "robot_port": str(robot["port"] or ""),
        "robot_id": spec.robot_id,
        "robot_spec_file": str(spec_file),
        "control_period_s": repr(float(config["period_s"] or package.contract.control_period_s)),
        "position_slice": json.dumps(list(package.contract.position_slice)),
        "workspace_low_m": json.dumps(list(spec.workspace_low)),
        "workspace_high_m": json.dumps(list(spec.workspace_high)),
        "explore": str(bool(config["explore"])).lower(),
        "seed": str(config["seed"]),
    }
    return {RUN_METADATA: values}


def run_attachments(config: dict[str, Any], spec_file: Path, package: Any) -> list[Any]:
    """The files a run's tick log carries: the robot spec, the resolved launch config, the package manifest."""
    from deploy.runtime.package_names import MANIFEST_NAME
    from deploy.runtime.ticklog import LogAttachment

    launch = yaml.safe_dump(config, sort_keys=False).encode()
    items = [
        LogAttachment("robot_spec.yaml", YAML, spec_file.read_bytes()),
        LogAttachment("launch.yaml", YAML, launch),
    ]
    manifest = Path(package.folder) / MANIFEST_NAME
    if manifest.is_file():
        items.append(LogAttachment("manifest.json", JSON, manifest.read_bytes()))
    return items


def open_live_view(live: dict[str, Any], spec: Any, contract: Any) -> Any:
    """The live view the launch file asks for (``live.enabled``), or None."""
    if not live["enabled"]:
        return None
    from deploy.runtime.live_view import LiveView, LiveViewUnavailableError

    gain_m = np.asarray(spec.actuator_gain, dtype=np.float64) * spec.command_scale_m
    box = (np.asarray(spec.workspace_low), np.asarray(spec.workspace_high))
    try:
        return LiveView(
            box,
            contract.position_slice,
            gain_m,
            host=live["host"],
            port=live["port"],
            scene_hz=live["scene_hz"],
            backlog=live["backlog"],
        )
    except LiveViewUnavailableError as err:
        raise LaunchError(f"live.enabled: {err}, or set live.enabled: false") from None
    except OSError as err:
        raise LaunchError(
            f"live view: cannot serve on {live['host']}:{live['port']} ({err}); pick another port"
        ) from None


class TransitionFeed:
    """Writes the controller's state transitions into the tick log as they happen (called after every tick, and
    once more after the run for the ones its shutdown made).

    :param ticklog: the run's ``TickLogWriter``.
    :param clock: the controller's monotonic clock (seconds): the transitions' log time.
    """

    def __init__(self, ticklog: Any, clock: Any = time.monotonic) -> None:
        self._ticklog = ticklog
        self._clock = clock
        self._history: list[Any] | None = None
        self.written = 0

    def on_tick(self, controller: Any, record: Any = None) -> None:
        """The controller's ``on_tick`` hook: log the transitions made since the last call."""
        self._history = controller.sm.history
        self.catch_up(self._history)

    def finish(self) -> None:
        """After the run: log the transitions its shutdown made (after the last tick)."""
        if self._history is not None:
            self.catch_up(self._history)

    def catch_up(self, history: list[Any]) -> None:
        """Log the transitions of ``history`` (the state machine's, in order) not logged yet."""
        now = self._clock()
        for transition in history[self.written :]:
            self._ticklog.add_transition(
                transition.tick, transition.source.value, transition.target.value, transition.reason, now
            )
        self.written = len(history)
