"""A package's ewc.npz is read as plain arrays when the package loads: a file re-sealed into it (every hash
recomputed, as anyone who can write the folder can) that is not the EWC file's plain float arrays is refused by name.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from package_fixtures import make_package, reseal

from deploy.runtime.package import EWC_FILE, PackageError, load_package

MARKER = Path(__file__).with_name("ewc_pickle_was_executed")  # never written: nothing may be unpickled


class Payload:
    """What an attacker pickles: unpickling it calls ``open(MARKER, "w")``, creating the marker file."""

    def __reduce__(self):
        return (open, (str(MARKER), "w"))


def npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


W = np.ones(3, np.float32)
BAD_EWC_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    "a_pickle": (lambda: pickle.dumps({"param/w": Payload()}), "pickled"),
    "an_object_array_in_the_npz": (
        lambda: npz_bytes(**{"param/w": np.array([Payload()], dtype=object), "fisher/w": W}),
        "Object arrays cannot be loaded",
    ),
    "a_single_npy_array": (lambda: npy_bytes(W), "not an .npz archive of named arrays"),
    "not_a_zip": (lambda: b"PK\x03\x04 garbage", "not an EWC .npz file"),
    "an_unknown_entry": (lambda: npz_bytes(**{"param/w": W, "fisher/w": W, "code": W}), "unexpected entry 'code'"),
    "integer_weights": (lambda: npz_bytes(**{"param/w": np.ones(3, np.int64), "fisher/w": W}), "dtype int64"),
    "a_nan_weight": (lambda: npz_bytes(**{"param/w": np.array([np.nan, 1, 1], np.float32), "fisher/w": W}), "finite"),
    "shapes_that_disagree": (lambda: npz_bytes(**{"param/w": W, "fisher/w": np.ones(4, np.float32)}), "shape"),
    "a_meta_array": (lambda: npz_bytes(**{"param/w": W, "fisher/w": W, "meta/lambda": W}), "must be a number"),
}


@pytest.mark.parametrize("case", list(BAD_EWC_FILES))
def test_a_resealed_ewc_file_that_is_not_plain_arrays_is_refused_by_name(tmp_path: Path, case: str) -> None:
    make_bytes, detail = BAD_EWC_FILES[case]
    folder = make_package(tmp_path / "pkg", ewc=True)
    (folder / EWC_FILE).write_bytes(make_bytes())
    reseal(folder, lambda manifest: None)  # every sha256 and the manifest digest match again
    with pytest.raises(PackageError) as err:
        load_package(folder)
    message = str(err.value)
    assert message.startswith(f"{folder / EWC_FILE}: is not a plain-array EWC file"), message
    assert detail in message, message
    assert not MARKER.exists()


def test_a_plain_ewc_file_still_loads_and_gives_its_anchor(tmp_path: Path) -> None:
    folder = make_package(tmp_path / "pkg", ewc=True)
    (folder / EWC_FILE).write_bytes(
        npz_bytes(**{"param/w": W, "fisher/w": W * 0.5, "meta/format_version": np.array(1), "meta/lambda": 10.0})
    )
    anchor = load_package(reseal(folder, lambda manifest: None)).load_ewc_anchor()
    np.testing.assert_array_equal(anchor["params"]["w"], W)
    np.testing.assert_array_equal(anchor["fisher"]["w"], W * 0.5)
