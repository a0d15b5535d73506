"""Turn a trained policy into a verified policy package folder (see ``deploy/runtime/package.py`` for the layout).

    from deploy.export.exporter import export_package
    export_package("runs/grpo_fetch.zip", "models/fetch_reach", env_id="DelayedFetchReach-v0")

Steps: torch -> policy.onnx -> policy_fp16.onnx / policy_int8.onnx (calibrated on the policy's own sim
observations) -> TensorRT engine when TensorRT and a GPU are here (else recorded as "build on the target", with
the command) -> parity / closed-loop / latency checks of every variant -> report -> manifest (sealed, written
last). The package is assembled in a temporary folder next to ``out_dir`` and renamed into place only when
every check passes, so ``out_dir`` never holds a half-written or failing package.
"""

from __future__ import annotations

import copy
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from deploy.ewc_file import EwcState, save_ewc
from deploy.export.fp16 import convert_fp16
from deploy.export.int8 import quantize_int8
from deploy.export.onnx_fp32 import export_onnx, torch_actions
from deploy.export.provenance import algorithm_provenance, jsonable, library_versions
from deploy.export.rollouts import ActFn, closed_loop_success_on, collect_observations, env_contract, make_env, on_envs
from deploy.export.tensorrt_build import (
    BUILD_COMMAND,
    TensorRTUnavailableError,
    build_engine_from_folder,
    tensorrt_status,
)
from deploy.export.verify import PARITY_TOLERANCE, check_report, latency_us, parity, write_report
from deploy.runtime import backends
from deploy.runtime.backends import INPUT_NAME, OUTPUT_NAME, BackendUnavailableError, OrtBackend
from deploy.runtime.package import (
    EWC_FILE,
    MANIFEST_NAME,
    ONNX_VARIANTS,
    PACKAGE_FORMAT_VERSION,
    SELFTEST_FILE,
    VARIANT_FILES,
    sha256_file,
    write_manifest,
)

logger = logging.getLogger(__name__)

MIN_PARITY_OBS = 10_000
SELFTEST_OBS = 1_024  # observations (and torch actions) shipped for the on-target self-test
PACKAGE_PLACEHOLDER = "<this package folder>"  # the package is copied to the robot: its path there is not known
MIN_EPISODES = 100
EVAL_BATCH = 1024
ROLLOUT_ENVS = 2  # sim envs stepped at once by the checks' rollouts, one thread each (the reference machine's cores)
PACKAGE_DIR_MODE = 0o755  # mkdtemp makes the folder owner-only; a package is read by the robot's service user


class ExportCheckError(RuntimeError):
    """The exported variants broke a parity or closed-loop tolerance; the package was not installed."""


@dataclass
class ExportConfig:
    """Sizes and seeds of the export checks.

    :param n_parity_obs: observations from sim rollouts for the parity check (>= 10,000).
    :param n_calibration_obs: observations for int8 calibration (separate seeds from the parity set).
    :param n_episodes: seeded closed-loop episodes per variant (>= 100).
    :param episode_seed: first closed-loop episode seed.
    :param parity_seed: first parity rollout seed.
    :param calibration_seed: first calibration rollout seed.
    :param exploration_noise_std: action noise (action units) on half the parity rollouts.
    :param calibration_noise_stds: action noise levels of the calibration rollouts (equal shares); wider than the
        parity set's so the int8 ranges cover it.
    :param int8_activation_bits: 16 (A16W8, default) or 8 (W8A8); see ``deploy/export/int8.py``.
    :param latency_calls: batch-1 calls timed per variant.
    :param max_batch: largest batch of the TensorRT profile.
    :param build_engine: try to build the TensorRT engine here (skipped, with a note, without TensorRT/GPU).
    :param strict: refuse to install a package that breaks a tolerance (raise ExportCheckError).
    :param variants: the ONNX variants to build, check and ship (fp32 always; the engine is built from it). Leaving
        one out is the way to ship a policy that a variant cannot carry within its tolerance (a high-gain cell
        policy's int8 missed 0.03 at one parity observation in 10,000); the runtime then refuses that variant by
        name (``variant 'int8' is not in this package``) instead of running it.
    """

    n_parity_obs: int = MIN_PARITY_OBS
    n_calibration_obs: int = 3_000
    n_episodes: int = MIN_EPISODES
    episode_seed: int = 10_000
    parity_seed: int = 20_000
    calibration_seed: int = 30_000
    exploration_noise_std: float = 0.3
    calibration_noise_stds: tuple[float, ...] = (0.0, 0.3, 1.0)
    int8_activation_bits: int = 16
    latency_calls: int = 5_000
    max_batch: int = 64
    build_engine: bool = True
    strict: bool = True
    variants: tuple[str, ...] = ONNX_VARIANTS
    allow_small_checks: bool = field(default=False, repr=False)  # unit tests only: smaller check sizes

    def __post_init__(self) -> None:
        self.variants = tuple(self.variants)
        unknown = [v for v in self.variants if v not in ONNX_VARIANTS]
        if unknown or "fp32" not in self.variants or len(set(self.variants)) != len(self.variants):
            raise ValueError(
                f"variants must be distinct ONNX variants of {list(ONNX_VARIANTS)} including 'fp32', got "
                f"{list(self.variants)}"
            )
        self.variants = tuple(v for v in ONNX_VARIANTS if v in self.variants)  # one order in files and reports
        if not self.allow_small_checks and (self.n_parity_obs < MIN_PARITY_OBS or self.n_episodes < MIN_EPISODES):
            raise ValueError(
                f"a package needs >= {MIN_PARITY_OBS} parity observations and >= {MIN_EPISODES} closed-loop "
                f"episodes, got {self.n_parity_obs} and {self.n_episodes}"
            )


@dataclass
class EwcAnchor:
    """EWC anchor shipped with the package: the sim-trained weights and their diagonal Fisher information.

    Written as ``ewc.npz`` by ``deploy.ewc_file`` (the file's one reader and writer), float32.

    :param params: parameter name -> anchor value (theta*), as in the policy's ``state_dict``.
    :param fisher: parameter name -> diagonal Fisher (same keys and shapes, >= 0).
    :param meta: how the Fisher was computed (samples, env, ...), recorded in the manifest.
    :param consolidations: fine-tuning rounds absorbed (online EWC; 0 for the sim-trained anchor), kept in the file.
    :param lam: EWC strength last used, kept in the file (None: not recorded).
    :param gamma: online-EWC decay last used, kept in the file (None: not recorded).
    """

    params: dict[str, np.ndarray]
    fisher: dict[str, np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)
    consolidations: int = 0
    lam: float | None = None
    gamma: float | None = None

    def __post_init__(self) -> None:
        self.state()  # the file's own checks: same names, same shapes, finite Fisher >= 0

    def state(self) -> EwcState:
        """What ``ewc.npz`` holds."""
        return EwcState(
            params={k: np.asarray(v, dtype=np.float32) for k, v in self.params.items()},
            fisher={k: np.asarray(v, dtype=np.float32) for k, v in self.fisher.items()},
            consolidations=self.consolidations,
            lam=self.lam,
            gamma=self.gamma,
        )

    def save(self, path: Path) -> None:
        save_ewc(path, self.state())


def load_policy(source: Any) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The export module and provenance of a GRPO checkpoint path, a GRPO model, a policy or a torch module."""
    if isinstance(source, (str, Path)):
        from robot_grpo.grpo import GRPO  # the training side is only needed to read a checkpoint

        source = GRPO.load(str(source), device="cpu")
    if hasattr(source, "policy") and hasattr(source.policy, "make_export_module"):
        return source.policy.make_export_module(), algorithm_provenance(source)
    if hasattr(source, "make_export_module"):
        return source.make_export_module(), {}
    if isinstance(source, torch.nn.Module):
        return source, {}
    raise TypeError(
        f"cannot export a {type(source).__name__}: pass a GRPO checkpoint path, a GRPO model, a policy with "
        "make_export_module(), or a torch module mapping float32 [B, flat_dim] to [B, action_dim]"
    )


def export_package(
    source: Any,
    out_dir: str | Path,
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    provenance: dict[str, Any] | None = None,
    ewc_anchor: EwcAnchor | None = None,
    config: ExportConfig | None = None,
    overwrite: bool = False,
    trained_delay_range: tuple[int, int] | None = None,
) -> Path:
    """Export ``source`` to a verified package in ``out_dir`` and return its path.

    :param source: GRPO checkpoint path, GRPO model, policy with ``make_export_module()``, or torch module.
    :param out_dir: package folder to create (must not exist unless ``overwrite``).
    :param env_id: registered sim env for the rollouts (the env the policy was trained on).
    :param env_kwargs: kwargs for ``gymnasium.make(env_id, ...)`` (delay, noise, calibration ...).
    :param provenance: extra or overriding provenance (required keys for a bare module: ``algorithm``).
    :param ewc_anchor: optional EWC anchor to ship as ``ewc.npz``.
    :param config: check sizes and seeds.
    :param overwrite: replace an existing ``out_dir``.
    :param trained_delay_range: the actuation delays (control steps, inclusive) the policy was trained on, when
        they are more than the export env's (a policy fine-tuned on a robot whose delay grew); the manifest records
        it as what the policy was trained for, and ``robot-grpo run`` checks robots against it.
    """
    config = config or ExportConfig()
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass overwrite=True or choose a new package folder")
    module, prov = load_policy(source)
    module = copy.deepcopy(module).eval()  # a frozen snapshot: the caller's policy keeps its mode and weights
    prov = {**prov, **(provenance or {})}
    if "algorithm" not in prov:
        raise ValueError("provenance must name the 'algorithm' when exporting a bare torch module")
    prov.setdefault("env_id", env_id)
    prov.setdefault("env_kwargs", jsonable(env_kwargs or {}))

    envs = [make_env(env_id, env_kwargs) for _ in range(ROLLOUT_ENVS)]
    env = envs[0]
    contract = env_contract(env)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        report = _build_variants(module, envs, contract, work, config, env_id)
        if ewc_anchor is not None:
            ewc_anchor.save(work / EWC_FILE)
        report["problems"] = check_report(report)
        write_report(work, report)
        manifest = _manifest(contract, env, prov, report, work, ewc_anchor, config, trained_delay_range)
        write_manifest(work, manifest)
        if report["problems"] and config.strict:
            rejected = out_dir.with_name(out_dir.name + ".rejected")
            if rejected.exists():
                shutil.rmtree(rejected)
            work.rename(rejected)
            raise ExportCheckError(
                f"the exported package fails its checks and was not installed (kept for inspection in {rejected}, "
                "see its report.md):\n  " + "\n  ".join(report["problems"])
            )
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
        out_dir.chmod(PACKAGE_DIR_MODE)
    finally:
        for each in envs:
            each.close()
        if work.exists():
            shutil.rmtree(work)
    return out_dir


def _batched(call: Any, obs: np.ndarray, batch: int = EVAL_BATCH) -> np.ndarray:
    return np.concatenate([call(obs[i : i + batch]) for i in range(0, len(obs), batch)])


def _build_variants(
    module: torch.nn.Module, envs: list[Any], contract: Any, work: Path, config: ExportConfig, env_id: str
) -> dict[str, Any]:
    """The variants and their report; the rollouts run on ``envs`` at once (``on_envs``), the latencies alone."""
    module = module.eval()

    def torch_act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.from_numpy(obs)).numpy()

    logger.info("export: torch -> %s, then fp16", VARIANT_FILES["fp32"])
    fp32 = export_onnx(module, contract.flat_dim, work / VARIANT_FILES["fp32"])
    n_actions = int(torch_act(np.zeros((1, contract.flat_dim), np.float32)).shape[1])
    if n_actions != contract.action_dim:
        raise ValueError(f"the policy outputs {n_actions} actions, the env's contract {contract.action_dim}")
    if "fp16" in config.variants:
        convert_fp16(fp32, work / VARIANT_FILES["fp16"])
    if "int8" in config.variants:
        logger.info("export: int8 calibration on %d sim observations", config.n_calibration_obs)
        share = config.n_calibration_obs // len(config.calibration_noise_stds)
        calibration = np.concatenate(
            on_envs(
                envs,
                [
                    lambda env, i=i, noise=noise: collect_observations(
                        env, torch_act, share, config.calibration_seed + i * share, noise
                    )
                    for i, noise in enumerate(config.calibration_noise_stds)
                ],
            )
        )
        quantize_int8(fp32, work / VARIANT_FILES["int8"], calibration, config.int8_activation_bits)

    logger.info("export: %d parity observations from sim rollouts", config.n_parity_obs)
    half = config.n_parity_obs // 2
    parity_obs = np.concatenate(
        on_envs(
            envs,
            [
                lambda env: collect_observations(env, torch_act, half, config.parity_seed),
                lambda env: collect_observations(
                    env, torch_act, config.n_parity_obs - half, config.parity_seed + half, config.exploration_noise_std
                ),
            ],
        )
    )
    reference = torch_actions(module, parity_obs)
    picks = np.linspace(0, len(parity_obs) - 1, min(SELFTEST_OBS, len(parity_obs))).astype(int)
    np.savez(work / SELFTEST_FILE, obs=parity_obs[picks], actions=reference[picks])
    seeds = list(range(config.episode_seed, config.episode_seed + config.n_episodes))
    report: dict[str, Any] = {
        "env_id": env_id,
        "n_parity_obs": len(parity_obs),
        "parity_seed": config.parity_seed,
        "n_episodes": config.n_episodes,
        "episode_seeds": seeds,
        "latency_backend": "ort-cpu (1 thread, I/O binding)",
        "latency_calls": config.latency_calls,
        "int8_scheme": f"static QDQ, int8 per-channel weights, {config.int8_activation_bits}-bit activations",
        "torch": {
            "success_rate": float(closed_loop_success_on(envs, lambda: torch_act, seeds).mean()),
            "latency": latency_us(torch_act, parity_obs, config.latency_calls),
        },
        "variants": {},
    }

    def check(
        variant: str, backend: Any, make_act: Callable[[], ActFn], rollout_envs: list[Any], batch: int = EVAL_BATCH
    ) -> dict[str, Any]:
        """Parity, closed-loop success (on ``rollout_envs``, each with its policy from ``make_act``) and latency of
        one variant."""
        logger.info("export: checking %s (parity, %d closed-loop episodes, latency)", variant, config.n_episodes)
        return {
            "file": VARIANT_FILES[variant],
            "backend": backend.name,
            "parity": parity(reference, _batched(backend, parity_obs, batch)),
            "success_rate": float(closed_loop_success_on(rollout_envs, make_act, seeds).mean()),
            "latency": latency_us(backend, parity_obs, config.latency_calls),
        }

    report["left_out"] = [v for v in ONNX_VARIANTS if v not in config.variants]
    for variant in config.variants:
        model = (work / VARIANT_FILES[variant]).read_bytes()
        report["variants"][variant] = check(
            variant, OrtBackend(model, "ort-cpu"), lambda m=model: OrtBackend(m, "ort-cpu"), envs
        )
    report["engine"] = _try_engine(work, config)
    if report["engine"]["status"] == "built":
        engine = backends.TensorRTBackend((work / VARIANT_FILES["engine"]).read_bytes())
        try:
            # one env: the engine's CUDA context is not shared between threads
            report["variants"]["engine"] = check("engine", engine, lambda: engine, envs[:1], engine.max_batch)
        finally:
            engine.close()
    return report


def _try_engine(work: Path, config: ExportConfig) -> dict[str, Any]:
    command = BUILD_COMMAND.format(package=PACKAGE_PLACEHOLDER, max_batch=config.max_batch)
    if not config.build_engine:
        return {"status": "not built", "detail": f"skipped by the caller; build on the target: {command}"}
    try:
        available, reason = tensorrt_status()
        if not available:
            raise TensorRTUnavailableError(reason)
        backends._import_cudart()  # the engine is checked like every variant below, so it must be runnable here
        facts = build_engine_from_folder(work, config.max_batch)
    except (TensorRTUnavailableError, BackendUnavailableError) as exc:
        (work / VARIANT_FILES["engine"]).unlink(missing_ok=True)
        return {"status": "not built", "detail": f"TensorRT unavailable here ({exc}); build on the target: {command}"}
    return {**facts, "detail": f"built and checked here; engines are device-specific, rebuild on the target: {command}"}


def _trained_for(env: Any, delay_range: tuple[int, int]) -> dict[str, Any] | None:
    """What the policy was trained for: the robot spec the sim env was built from, with the delay range and noise
    the env actually used (an explicit override in the launch file wins over the spec, and is what counts)."""
    sim = env.unwrapped
    spec = getattr(sim, "robot_spec", None)
    if spec is None:
        return None
    low, high = delay_range
    return {
        "robot_id": spec.robot_id,
        "spec_date": spec.date,
        "control_period_s": spec.control_period_s,
        "command_scale_m": spec.command_scale_m,
        "action_delay_steps": {"low": int(low), "high": int(high)},
        "observation_noise_std_m": [float(v) for v in sim.obs_noise_std_m],
        "action_gain": float(sim.action_gain),
    }


def _manifest(
    contract: Any,
    env: Any,
    provenance: dict[str, Any],
    report: dict[str, Any],
    work: Path,
    ewc_anchor: EwcAnchor | None,
    config: ExportConfig,
    trained_delay_range: tuple[int, int] | None = None,
) -> dict[str, Any]:
    low, high = trained_delay_range or env.unwrapped.delay_range
    variants = {v: VARIANT_FILES[v] for v in config.variants}
    if (work / VARIANT_FILES["engine"]).exists():
        variants["engine"] = VARIANT_FILES["engine"]
    files = sorted(p.name for p in work.iterdir() if p.is_file() and p.name != MANIFEST_NAME)
    engine = {k: v for k, v in report["engine"].items() if k != "detail"}
    engine["build_command"] = BUILD_COMMAND.format(package=PACKAGE_PLACEHOLDER, max_batch=config.max_batch)
    history_offset = contract.state_dim
    return {
        "format_version": PACKAGE_FORMAT_VERSION,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "contract": contract.to_dict(),
        "pending_commands": {
            "location": "observation",
            "start": history_offset,
            "stop": history_offset + contract.history_len * contract.action_dim,
            "rows": contract.history_len,
            "row_size": contract.action_dim,
            "order": "oldest_first",
            "meaning": "the last history_len commands sent; with delay k the last k rows are still pending",
        },
        "action_delay_steps": {"low": int(low), "high": int(high)},
        "trained_for": _trained_for(env, (low, high)),
        "action_delay_s": {"low": low * contract.control_period_s, "high": high * contract.control_period_s},
        "control_period_s": contract.control_period_s,
        "io": {
            "input": INPUT_NAME,
            "output": OUTPUT_NAME,
            "dtype": "float32",
            "input_shape": ["batch", contract.flat_dim],
            "output_shape": ["batch", contract.action_dim],
        },
        "variants": variants,
        "engine": engine,
        "ewc": None if ewc_anchor is None else {"file": EWC_FILE, **jsonable(ewc_anchor.meta)},
        "selftest": {
            "file": SELFTEST_FILE,
            "n_obs": min(SELFTEST_OBS, config.n_parity_obs),
            "meaning": "obs from the parity rollouts and the torch policy's actions on them; every backend made from "
            "this package must reproduce them within its variant's tolerance (action units)",
            "tolerance": dict(PARITY_TOLERANCE),
        },
        "provenance": jsonable(provenance),
        "export_config": jsonable(asdict(config)),
        "checks": {"passed": not report["problems"], "problems": report["problems"]},
        "versions": library_versions(),
        "files": {name: sha256_file(work / name) for name in files},
    }
