"""Every manifest key known, typed, and every fact the manifest records twice consistent (stdlib + the contract).

Fields: every manifest key is one the exporter writes (:data:`MANIFEST_KEYS`, :data:`SECTION_KEYS`; a misspelt key
would otherwise silently mean "absent"), of its type (``"false"`` is not a boolean, ``"2"`` not a step count), and
every fact the manifest records twice (the control period, the delay in steps and in seconds, the pending-command
layout, the io shapes, what ``trained_for`` says) has one value. The trained delay range must fit the action history
the policy sees (``high <= contract.history_len``), except for a fine-tuned package (``provenance.finetuned_from``),
which was tuned and gated at the robot's longer delay with the running policy's history.

:func:`check_manifest_keys` runs before the files are hashed (the key sets and the ``files`` table),
:func:`check_manifest_fields` after the contract is read (everything the contract or the file table pins down).
Every refusal is a :class:`~deploy.runtime.package_names.PackageError` naming the manifest and the field.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from deploy.contract import MAX_DELAY_STEPS, ObservationContract
from deploy.contract_dict import is_int
from deploy.runtime.backends import INPUT_NAME, OUTPUT_NAME
from deploy.runtime.compatibility import MATCH_TOLERANCE
from deploy.runtime.package_names import DIGEST_FIELD, EWC_FILE, VARIANT_FILES, PackageError, check_file_name

IO_NAMES = {"input": INPUT_NAME, "output": OUTPUT_NAME, "dtype": "float32"}  # what the backends run

#: Every top-level manifest key the exporter and the engine builder write, and whether a package must have it.
#: Any other key is refused: a misspelt one ('self_test', 'check') would otherwise silently mean "absent".
MANIFEST_KEYS: dict[str, bool] = {
    "format_version": True,
    "created_utc": False,
    "contract": True,
    "pending_commands": False,
    "action_delay_steps": True,
    "trained_for": False,
    "action_delay_s": False,
    "control_period_s": False,
    "io": True,
    "variants": False,
    "engine": False,
    "ewc": False,
    "selftest": False,
    "provenance": False,
    "export_config": False,
    "checks": False,
    "versions": False,
    "files": True,
    DIGEST_FIELD: True,
}
#: Keys of the manifest's sections (key -> required); sections not listed here (provenance, export_config,
#: versions, the EWC metadata) are free-form records the runtime does not act on.
SECTION_KEYS: dict[str, dict[str, bool]] = {
    "action_delay_steps": {"low": True, "high": True},
    "action_delay_s": {"low": True, "high": True},
    "pending_commands": {
        "location": True,
        "start": True,
        "stop": True,
        "rows": True,
        "row_size": True,
        "order": True,
        "meaning": False,
    },
    "io": {"input": False, "output": False, "dtype": False, "input_shape": True, "output_shape": True},
    "trained_for": {
        "robot_id": False,
        "spec_date": False,
        "control_period_s": False,
        "command_scale_m": False,
        "action_delay_steps": False,
        "observation_noise_std_m": False,
        "action_gain": False,
    },
    "engine": {
        "status": True,
        "build_command": False,
        "tensorrt_version": False,
        "device": False,
        "mode": False,
        "source": False,
        "profile_batch": False,
        "fp32_pinned_layers": False,
        "selftest": False,
        "selftest_max_abs": False,
        "selftest_tolerance": False,
    },
    "selftest": {"file": True, "n_obs": False, "meaning": False, "tolerance": True},
    "checks": {"passed": True, "problems": True},
}
ENGINE_STATUSES = ("built", "not built")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def check_manifest_keys(path: Path, manifest: dict[str, Any]) -> dict[str, str]:
    """The manifest's top-level keys are known and the required ones present; returns its ``files`` table.

    ``path`` is the manifest's path (errors name it); ``files`` is a non-empty {plain file name: sha256 hex}.
    """
    _check_keys(path, "the manifest", manifest, MANIFEST_KEYS)
    return _check_files_table(path, manifest["files"])


def check_manifest_fields(
    path: Path, manifest: dict[str, Any], contract: ObservationContract, allow_failed_checks: bool = False
) -> None:
    """Every section of a manifest that passed :func:`check_manifest_keys`, against ``contract`` and its files.

    A package whose export checks failed is refused unless ``allow_failed_checks``.
    """
    files = manifest["files"]
    _check_checks(path, manifest, allow_failed_checks)
    _check_delay(path, manifest, contract)
    _check_io(path, manifest, contract)
    _check_layout_facts(path, manifest, contract)
    _check_variants(path, manifest, files)
    _check_selftest_and_ewc(path, manifest, files)


# The checks -----------------------------------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_keys(path: Path, where: str, section: Any, keys: dict[str, bool]) -> dict[str, Any]:
    """``section`` is a JSON object with only the listed keys and every required one; returns it."""
    if not isinstance(section, dict):
        raise PackageError(
            path, f"{where} must be a JSON object, got {json.dumps(section)[:80]}; re-export the package"
        )
    unknown = sorted(set(section) - set(keys))
    if unknown:
        raise PackageError(
            path,
            f"{where} has unknown key(s) {unknown} (misspelt?); the allowed keys are {list(keys)}. Re-export the "
            "package rather than editing its manifest",
        )
    missing = [key for key, required in keys.items() if required and key not in section]
    if missing:
        raise PackageError(path, f"{where} is missing {missing}; re-export the package")
    return section


def _section(path: Path, manifest: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The manifest's section ``key`` with its keys checked, or None when the manifest has none."""
    if manifest.get(key) is None:
        return None
    return _check_keys(path, f"section {key!r}", manifest[key], SECTION_KEYS[key])


def _field_error(path: Path, field: str, value: Any, expected: str) -> PackageError:
    return PackageError(
        path, f"field {field!r} is {json.dumps(value)[:80]}; it must be {expected}. Re-export the package"
    )


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= MATCH_TOLERANCE


def _check_files_table(path: Path, files: Any) -> dict[str, str]:
    """``files``: a non-empty {plain file name: sha256 hex} table."""
    if not isinstance(files, dict) or not files:
        raise PackageError(path, "has no 'files' table of sha256 digests; re-export the package")
    for name, digest in files.items():
        check_file_name(path.parent, name)
        if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
            raise _field_error(path, f"files.{name}", digest, "a sha256 digest (64 lowercase hex characters)")
    return files


def _check_checks(path: Path, manifest: dict[str, Any], allow_failed_checks: bool) -> None:
    """``checks``: passed (bool) agrees with problems (a list of strings); a failed package needs the opt-in."""
    checks = _section(path, manifest, "checks")
    if checks is None:
        return
    passed, problems = checks["passed"], checks["problems"]
    if not isinstance(passed, bool):
        raise _field_error(path, "checks.passed", passed, "true or false (a JSON boolean, not a string)")
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise _field_error(path, "checks.problems", problems, "a list of strings")
    if passed == bool(problems):
        raise PackageError(
            path,
            f"checks.passed is {json.dumps(passed)} but checks.problems lists {len(problems)} problem(s): the "
            "manifest contradicts itself; re-export the package",
        )
    if not passed and not allow_failed_checks:
        raise PackageError(
            path, "this package failed its export checks and must not run on a robot: " + "; ".join(problems)
        )


def _delay_range(path: Path, field: str, section: Any) -> tuple[int, int]:
    """A {low, high} delay range in control steps, 0 <= low <= high <= MAX_DELAY_STEPS."""
    delay = _check_keys(path, f"section {field!r}", section, SECTION_KEYS["action_delay_steps"])
    for end in ("low", "high"):
        if not is_int(delay[end]):
            raise _field_error(path, f"{field}.{end}", delay[end], "an integer number of control steps")
    low, high = delay["low"], delay["high"]
    if not 0 <= low <= high <= MAX_DELAY_STEPS:
        raise PackageError(
            path,
            f"{field} {low}..{high} control steps is not a delay range (0 <= low <= high <= {MAX_DELAY_STEPS}); "
            "re-export the package",
        )
    return low, high


def _check_delay(path: Path, manifest: dict[str, Any], contract: ObservationContract) -> None:
    """The trained delay range fits the action history the policy sees, and its copies agree with it."""
    low, high = _delay_range(path, "action_delay_steps", manifest["action_delay_steps"])
    provenance = manifest.get("provenance")
    finetuned = isinstance(provenance, dict) and "finetuned_from" in provenance
    if high > contract.history_len and not finetuned:
        raise PackageError(
            path,
            f"action_delay_steps says the policy was trained for delays {low}..{high} control steps, but its "
            f"observation carries only the last {contract.history_len} commands (contract.history_len): at delay "
            f"{high} it would not see {high - contract.history_len} of the commands in flight. Re-export with "
            f"action_delay_steps.high <= {contract.history_len}, or a contract whose history_len covers {high}",
        )
    seconds = _section(path, manifest, "action_delay_s")
    if seconds is not None:
        for end, steps in (("low", low), ("high", high)):
            value = seconds[end]
            if not _is_number(value) or not _same(value, steps * contract.control_period_s):
                raise PackageError(
                    path,
                    f"action_delay_s.{end} is {json.dumps(value)}, but action_delay_steps.{end} {steps} x "
                    f"control_period_s {contract.control_period_s} = {steps * contract.control_period_s:g} s; "
                    "the manifest contradicts itself: re-export the package",
                )
    trained_for = _section(path, manifest, "trained_for")
    if trained_for is not None:
        if "action_delay_steps" in trained_for:
            trained = _delay_range(path, "trained_for.action_delay_steps", trained_for["action_delay_steps"])
            if trained != (low, high):
                raise PackageError(
                    path,
                    f"trained_for.action_delay_steps {trained[0]}..{trained[1]} differs from action_delay_steps "
                    f"{low}..{high}: the manifest contradicts itself; re-export the package",
                )
        for key, contract_key in (("control_period_s", "control_period_s"), ("command_scale_m", "action_scale_m")):
            value = trained_for.get(key)
            if value is not None and (not _is_number(value) or not _same(value, getattr(contract, contract_key))):
                raise PackageError(
                    path,
                    f"trained_for.{key} is {json.dumps(value)}, the contract's {contract_key} "
                    f"{getattr(contract, contract_key)}: the manifest contradicts itself; re-export the package",
                )


def _check_io(path: Path, manifest: dict[str, Any], contract: ObservationContract) -> None:
    """``io``: the tensor names and dtype the backends run, and shapes [batch, flat_dim] -> [batch, action_dim]."""
    io = _check_keys(path, "section 'io'", manifest["io"], SECTION_KEYS["io"])
    for key, expected in IO_NAMES.items():
        if key in io and io[key] != expected:
            raise _field_error(path, f"io.{key}", io[key], json.dumps(expected))
    shapes = [
        shape[1:] if isinstance(shape, list) and len(shape) == 2 else None
        for shape in (io["input_shape"], io["output_shape"])
    ]
    if shapes != [[contract.flat_dim], [contract.action_dim]]:
        raise PackageError(
            path,
            f"its io shapes {io['input_shape']} -> {io['output_shape']} do not match its contract "
            f"({contract.flat_dim} -> {contract.action_dim}); re-export the package",
        )


def _check_layout_facts(path: Path, manifest: dict[str, Any], contract: ObservationContract) -> None:
    """The top-level control period and the ``pending_commands`` layout repeat the contract: they must agree."""
    period = manifest.get("control_period_s")
    if period is not None and (not _is_number(period) or not _same(period, contract.control_period_s)):
        raise PackageError(
            path,
            f"control_period_s is {json.dumps(period)} s, the contract's control_period_s "
            f"{contract.control_period_s} s: the manifest contradicts itself; re-export the package",
        )
    pending = _section(path, manifest, "pending_commands")
    if pending is None:
        return
    expected = {
        "location": "observation",
        "start": contract.state_dim,
        "stop": contract.observation_dim,
        "rows": contract.history_len,
        "row_size": contract.action_dim,
        "order": "oldest_first",
    }
    for key, value in expected.items():
        if pending[key] != value or isinstance(pending[key], bool):
            raise PackageError(
                path,
                f"pending_commands.{key} is {json.dumps(pending[key])}, the contract says {json.dumps(value)}: the "
                "manifest contradicts itself; re-export the package",
            )


def _check_variants(path: Path, manifest: dict[str, Any], files: dict[str, str]) -> None:
    """``variants``: {known variant: listed file}; the engine section says "built" exactly when there is one."""
    variants = manifest.get("variants", {})
    if not isinstance(variants, dict):
        raise _field_error(path, "variants", variants, f"an object mapping a variant {list(VARIANT_FILES)} to a file")
    for variant, name in variants.items():
        if variant not in VARIANT_FILES:
            raise PackageError(path, f"unknown variant {variant!r}; this runtime knows {list(VARIANT_FILES)}")
        if not isinstance(name, str) or name not in files:
            raise PackageError(
                path.parent / str(name), f"variant {variant!r} points at a file the manifest does not hash"
            )
    engine = _section(path, manifest, "engine")
    if engine is None:
        return
    status = engine["status"]
    if status not in ENGINE_STATUSES:
        raise _field_error(path, "engine.status", status, f"one of {list(ENGINE_STATUSES)}")
    if (status == "built") != ("engine" in variants):
        has = "has" if "engine" in variants else "has no"
        raise PackageError(
            path,
            f"engine.status is {status!r} but the package {has} 'engine' variant: the manifest contradicts itself; "
            "rebuild the engine (python -m deploy.export.tensorrt_build) or re-export the package",
        )
    if "build_command" in engine and not isinstance(engine["build_command"], str):
        raise _field_error(path, "engine.build_command", engine["build_command"], "a string")


def _check_selftest_and_ewc(path: Path, manifest: dict[str, Any], files: dict[str, str]) -> None:
    """``selftest``: a listed file and per-variant tolerances (action units); ``ewc``: ewc.npz, listed."""
    selftest = _section(path, manifest, "selftest")
    if selftest is not None:
        if not isinstance(selftest["file"], str) or selftest["file"] not in files:
            raise _field_error(path, "selftest.file", selftest["file"], "a file the manifest lists")
        tolerance = selftest["tolerance"]
        if (
            not isinstance(tolerance, dict)
            or not set(tolerance) <= set(VARIANT_FILES)
            or not all(_is_number(v) and v >= 0 for v in tolerance.values())
        ):
            raise _field_error(
                path,
                "selftest.tolerance",
                tolerance,
                f"an object {{variant: tolerance >= 0}} over {list(VARIANT_FILES)}",
            )
        if "n_obs" in selftest and (not is_int(selftest["n_obs"]) or selftest["n_obs"] < 1):
            raise _field_error(path, "selftest.n_obs", selftest["n_obs"], "an integer >= 1")
    if "ewc" in manifest:
        ewc = manifest["ewc"]
        if ewc is None:
            if EWC_FILE in files:
                raise PackageError(
                    path, f"ewc is null but the package holds {EWC_FILE}: the manifest contradicts itself"
                )
        elif not isinstance(ewc, dict) or ewc.get("file") != EWC_FILE or EWC_FILE not in files:
            raise _field_error(path, "ewc", ewc, f'null or an object with "file": "{EWC_FILE}" (a listed file)')
    for key in ("provenance", "export_config", "versions"):
        if key in manifest and not isinstance(manifest[key], dict):
            raise _field_error(path, key, manifest[key], "a JSON object")
    if "created_utc" in manifest and not isinstance(manifest["created_utc"], str):
        raise _field_error(path, "created_utc", manifest["created_utc"], "a string")
