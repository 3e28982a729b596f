"""A model file cannot take the machine or give silent wrong scores (issue 47, items 1 and 3).

Every file here is hostile: built from a real model file by changing one thing,
as a careless user or an attacker would. Each must be refused, naming the file
and the member, before its arrays are read; and ``save_model`` refuses what
``load_model`` would refuse.
"""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest

from kernelscale import (
    DistributedKernelPCA,
    StreamingKernelPCA,
    VerticalKernelPCA,
)
from kernelscale.model import is_model_file, load_model, save_model


def _data(seed: int = 0, n: int = 60, d: int = 3):
    return np.random.default_rng(seed).standard_normal((n, d))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A bare landmark model, a fitted DistributedKernelPCA and a StreamingKernelPCA."""
    folder = tmp_path_factory.mktemp("hostile")
    X = _data()
    est = DistributedKernelPCA(n_components=3, gamma=0.5, n_landmarks=20, n_workers=2,
                               random_state=0).fit(X)
    paths = {"bare": folder / "bare.npz", "estimator": folder / "est.npz",
             "stream": folder / "stream.npz"}
    save_model(est.model_, paths["bare"])
    save_model(est, paths["estimator"])
    save_model(StreamingKernelPCA(n_components=2, n_random_features=40, sketch_size=8,
                                  random_state=0).fit(X), paths["stream"])
    return paths


def _members(path) -> tuple[dict, dict]:
    with np.load(path, allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    return json.loads(str(arrays.pop("__header__"))), arrays


def _rewrite(path, out, header=None, **arrays):
    """``path`` with its header and some arrays replaced (np.savez: a plain archive)."""
    old_header, old_arrays = _members(path)
    np.savez(out, __header__=np.array(json.dumps(header or old_header)),
             **{**old_arrays, **arrays})
    return out


def _refused(path, *patterns) -> str:
    with pytest.raises(ValueError) as info:
        load_model(path)
    message = str(info.value)
    assert str(path) in message
    for pattern in patterns:
        assert pattern in message, message
    return message


def _zip_member(name: str, npy_header: bytes, n_zero_bytes: int, compress=True) -> tuple:
    return name, npy_header, n_zero_bytes, compress


def _write_zip(out, members) -> None:
    """An archive whose members are an .npy header then zeros, written in chunks (a
    declared array of tens of MB costs kilobytes, compressed)."""
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members:
            if isinstance(data, bytes):
                archive.writestr(name, data)
                continue
            header, n_zeros = data
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as fh:
                fh.write(header)
                chunk = bytes(2**20)
                for start in range(0, n_zeros, len(chunk)):
                    fh.write(chunk[: min(len(chunk), n_zeros - start)])


def _npy_header(shape, dtype="<f8") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# --- 1. a small file cannot take the machine ---------------------------------------------

def test_a_declared_shape_the_header_does_not_imply_is_refused_before_it_is_read(files,
                                                                               tmp_path):
    """A 6 MB file whose coef.npy declared 268,435,456 x 3 drove transform to 6.5 GB: the
    loader read every member before comparing any shape. Here coef declares 2**20 x 3
    (24 MiB of compressed zeros in a file of kilobytes); refused with nothing of that
    size allocated."""
    header, arrays = _members(files["bare"])
    out = tmp_path / "big_coef.npz"
    members = [(f"{name}.npy", _npy(value)) for name, value in arrays.items() if name != "coef"]
    members += [("__header__.npy", _npy(np.array(json.dumps(header)))),
                ("coef.npy", (_npy_header((2**20, 3)), 8 * 3 * 2**20))]
    _write_zip(out, members)
    assert out.stat().st_size < 2**20
    tracemalloc.start()
    try:
        _refused(out, "damaged landmark_kpca file", "member coef.npy is 1,048,576 x 3 "
                 "float64; its header implies 20 x any")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20  # the 24 MiB were never allocated


def test_a_member_whose_bytes_disagree_with_its_declared_shape_is_refused(files, tmp_path):
    """The issue's own shape, 268,435,456 x 3, declared over a few bytes."""
    header, arrays = _members(files["bare"])
    out = tmp_path / "truncated.npz"
    members = [(f"{name}.npy", _npy(value)) for name, value in arrays.items() if name != "coef"]
    members += [("__header__.npy", _npy(np.array(json.dumps(header)))),
                ("coef.npy", _npy_header((268_435_456, 3)) + bytes(480))]
    _write_zip(out, members)
    _refused(out, "member coef.npy declares 268,435,456 x 3 float64 (6,442,450,944 bytes) "
             "but holds 480")


def test_a_model_that_needs_more_memory_than_there_is_is_refused_before_it_is_read(
        files, tmp_path, monkeypatch):
    """Shapes that agree with each other and with the header, but more memory than
    available (here a limit of 16 MiB): refused with what it needs, nothing read."""
    header, _ = _members(files["bare"])
    n = 2**20  # landmarks, coef and centre of a million rows: 56 MiB in all
    header = {**header, "landmarks_shape": [n, 3]}
    out = tmp_path / "consistent.npz"
    _write_zip(out, [("__header__.npy", _npy(np.array(json.dumps(header)))),
                     ("coef.npy", (_npy_header((n, 3)), 24 * n)),
                     ("landmarks.npy", (_npy_header((n, 3)), 24 * n)),
                     ("center.npy", (_npy_header((n,)), 8 * n)),
                     ("eigenvalues.npy", _npy(np.ones(3)))])
    monkeypatch.setenv("KERNELSCALE_MEMORY_LIMIT", "16M")
    tracemalloc.start()
    try:
        with pytest.raises(MemoryError, match=r"loading .*consistent.npz \(KernelPCAModel\) "
                                              r"needs about 56.0 MiB .* more than the 16.0 "
                                              r"MiB available"):
            load_model(out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


def test_a_streaming_header_naming_1e8_random_features_is_refused(files, tmp_path,
                                                                  monkeypatch):
    """A 66 KB streaming model whose header said n_random_features = 10**8 reached 7.2 GB
    and a MemoryError traceback: restoring rebuilds a d x m feature map and an l x m
    sketch that no array of the file shows."""
    header, arrays = _members(files["stream"])
    sketcher = header["state"]["sketcher"]
    header["state"]["sketcher"] = {**sketcher, "n_random_features": 10**8}
    _refused(_rewrite(files["stream"], tmp_path / "one.npz", header),
             "its sketch has n_random_features = 100,000,000, its parameters say 40")
    # The header changed everywhere, and an empty sketch of 10^8 columns: consistent,
    # but the map and the sketch restoring them allocates are counted first.
    header["params"]["n_random_features"] = 10**8
    out = _rewrite(files["stream"], tmp_path / "all.npz", header,
                   fd_rows=np.zeros((0, 10**8)))
    monkeypatch.setenv("KERNELSCALE_MEMORY_LIMIT", "1G")
    with pytest.raises(MemoryError, match=r"needs about 8.9 GiB \(its 8 x 100,000,000 sketch: "
                                          r"6.0 GiB; its random feature map: 3.0 GiB\) of "
                                          r"memory, more than the 1.0 GiB available"):
        load_model(out)


def test_a_header_nested_200000_deep_is_refused_without_a_recursion_error(files, tmp_path):
    _, arrays = _members(files["bare"])
    out = tmp_path / "deep.npz"
    np.savez(out, __header__=np.array("[" * 200_000 + "]" * 200_000), **arrays)
    _refused(out, "damaged header: its JSON is nested 200,000 deep; a model file's is at "
             "most 32 deep")
    assert not is_model_file(out)


# --- 3. silent wrong results ------------------------------------------------------------

@pytest.mark.parametrize("change, patterns", [
    (lambda a: {"coef": np.full_like(a["coef"], np.nan)},
     ["member coef.npy holds 60 NaN or infinite values"]),
    (lambda a: {"eigenvalues": np.array([np.inf, 1.0, 1.0])},
     ["member eigenvalues.npy holds 1 NaN or infinite value"]),
    (lambda a: {"center": np.where(np.arange(20) == 3, -np.inf, a["center"])},
     ["member center.npy holds 1 NaN or infinite value"]),
    (lambda a: {"coef": (a["coef"] * 100).astype(np.int8)},
     ["member coef.npy holds int8 values where float64 or float32 is expected"]),
    (lambda a: {"coef": a["coef"] > 0},
     ["member coef.npy holds bool values where float64 or float32 is expected"]),
    (lambda a: {"coef": a["coef"].ravel()},
     ["member coef.npy is 60 float64 values; its header implies 20 x any (2 dimensions)"]),
    (lambda a: {"coef": np.zeros(20, dtype=[("a", "f8"), ("b", "f8"), ("c", "f8")])},
     ["member coef.npy holds [('a', '<f8'), ('b', '<f8'), ('c', '<f8')] values; a model "
      "file holds arrays of numbers and text only"]),
    (lambda a: {"coef": np.ones((21, 3))},
     ["member coef.npy is 21 x 3 float64; its header implies 20 x any"]),
    (lambda a: {"eigenvalues": np.ones(4)},
     ["member eigenvalues.npy is 4 float64 values; its header implies 3"]),
    (lambda a: {"landmarks": np.ones((20, 4))},
     ["member landmarks.npy is 20 x 4 float64; its header implies 20 x 3"]),
], ids=["nan-coef", "inf-eigenvalue", "inf-center", "int8", "bool", "1d", "structured",
        "rows", "eigenvalues", "features"])
def test_arrays_that_would_give_wrong_scores_are_refused_naming_the_member(
        files, tmp_path, change, patterns):
    """Each loaded and wrote NaN, all-zero or wrong scores with exit code 0, or failed
    with a numpy message naming no file (IndexError, a broadcast error)."""
    _, arrays = _members(files["bare"])
    _refused(_rewrite(files["bare"], tmp_path / "m.npz", **change(arrays)), *patterns)


def test_a_duplicated_member_is_refused_not_silently_replaced(files, tmp_path):
    """np.load let the second coef.npy win: all-zero scores, exit code 0."""
    out = tmp_path / "dup.npz"
    out.write_bytes(files["bare"].read_bytes())
    with zipfile.ZipFile(out, "a") as archive, pytest.warns(UserWarning, match="Duplicate"):
        archive.writestr("coef.npy", _npy(np.zeros((20, 3))))
    _refused(out, "member coef.npy appears 2 times (a model file holds each array once)")
    assert not is_model_file(out)


def test_a_huge_polynomial_degree_in_the_header_is_refused(files, tmp_path):
    """degree 1000000 in a landmark model's header: every score NaN, exit code 0."""
    header, _ = _members(files["bare"])
    header["kernel"] = {"name": "poly", "gamma": 0.5, "degree": 1_000_000, "coef0": 1.0,
                        "order": 1}
    _refused(_rewrite(files["bare"], tmp_path / "deg.npz", header),
             "its poly kernel (degree 1000000, gamma 0.5, coef0 1) overflows on its own "
             "landmarks: k(y, y) is not finite for 20 of them")


@pytest.mark.parametrize("column, value, pattern", [
    (0, -1, "holds round codes outside 0 to"),
    (3, 99, "holds kind codes outside 0 to"),
    (5, -100, "holds negative workers, words and bytes"),
])
def test_ledger_codes_out_of_range_are_refused(files, tmp_path, column, value, pattern):
    """A negative round code loaded as the ledger's last round, silently."""
    _, arrays = _members(files["estimator"])
    messages = arrays["ledger.messages"].copy()
    messages[0, column] = value
    _refused(_rewrite(files["estimator"], tmp_path / "ledger.npz",
                      **{"ledger.messages": messages}), "member ledger.messages.npy", pattern)


def test_estimator_headers_that_disagree_with_their_arrays_are_refused(files, tmp_path):
    header, _ = _members(files["estimator"])
    _refused(_rewrite(files["estimator"], tmp_path / "a.npz",
                      {**header, "n_features_in": 4}),
             "its model takes 3 features, its header says n_features_in = 4")
    _refused(_rewrite(files["estimator"], tmp_path / "b.npz",
                      {**header, "params": {**header["params"], "n_components": 2}}),
             "its model has 3 components, its parameters say n_components = 2")
    _refused(_rewrite(files["estimator"], tmp_path / "c.npz", files["estimator"] and {
        **header, "ledger": {**header["ledger"], "kind": ["rows"]}}),
        "its ledger names the kind 'rows'")


@pytest.mark.parametrize("which", ["bare", "estimator"])
def test_save_model_refuses_what_load_model_would_refuse(which, tmp_path):
    """save_model wrote a NaN model without complaint."""
    X = _data(1)
    est = DistributedKernelPCA(n_components=2, gamma=0.5, n_landmarks=20, n_workers=2,
                               random_state=1).fit(X)
    est.model_.coef[3, 1] = np.nan
    path = tmp_path / "nan.npz"
    what = est.model_ if which == "bare" else est
    name = "landmark_kpca" if which == "bare" else "DistributedKernelPCA"
    member = "coef.npy" if which == "bare" else "model.coef.npy"
    with pytest.raises(ValueError, match=rf"This {name} cannot be saved to .*nan.npz: member "
                                         rf"{member} holds 1 NaN or infinite value \(load_model "
                                         r"would refuse such a file\)"):
        save_model(what, path)
    assert not path.exists()


# --- the marker: only a file kernelscale wrote ---------------------------------------------

def test_a_users_own_archive_with_our_member_names_is_not_a_model(files, tmp_path):
    """Any zip with a member named params.npy or __header__.npy was taken for a model (so
    fit --out replaced it without --force)."""
    own = tmp_path / "own.npz"
    np.savez(own, params=np.arange(4.0), weights=np.ones(3))
    header_named = tmp_path / "header.npz"
    np.savez(header_named, __header__=np.array("my notes"), weights=np.ones(3))
    json_object = tmp_path / "json.npz"
    np.savez(json_object, __header__=np.array('{"author": "me"}'), weights=np.ones(3))
    for path in (own, header_named, json_object):
        assert not is_model_file(path), path
    for path in files.values():
        assert is_model_file(path), path


# --- a vertical model's party files --------------------------------------------------------

def test_a_vertical_model_refuses_a_party_file_that_changed(tmp_path):
    """Scores up to 0.49 different, no warning, once a party file changed."""
    X = _data(2, n=40, d=4)
    parts = [tmp_path / "a.npy", tmp_path / "b.npy"]
    np.save(parts[0], X[:, :2])
    np.save(parts[1], X[:, 2:])
    est = VerticalKernelPCA(n_components=2, gamma=0.5).fit([str(p) for p in parts])
    model = tmp_path / "v.npz"
    save_model(est, model)
    np.testing.assert_allclose(load_model(model).transform(X), est.transform(X), atol=1e-12)

    loaded = load_model(model)  # loaded while the file was whole: checked where it is read
    np.save(parts[0], X[:, :2] + 0.3)  # same size, other content
    _refused(model, "v.npz cannot be loaded: party 0's training block", "a.npy changed since "
             "the model was saved "
             "(same size, other content (its SHA-256 differs))", "fit the model again")
    with pytest.raises(ValueError, match="a.npy changed since the model was saved"):
        loaded.transform(X)
    np.save(parts[0], np.vstack([X[:, :2], X[:3, :2]]))  # three more rows
    _refused(model, "a.npy changed since the model was saved (816 bytes, the model "
             "recorded 768)")
    np.save(parts[0], X[:, :2])  # restored: loads again
    np.testing.assert_allclose(load_model(model).transform(X), est.transform(X), atol=1e-12)
    # saving the loaded model keeps the record it was fitted with
    save_model(load_model(model), tmp_path / "again.npz")
    np.save(parts[0], X[:, :2] * 2)
    _refused(tmp_path / "again.npz", "a.npy changed since the model was saved")


def test_a_vertical_model_whose_feature_blocks_overlap_is_refused(tmp_path):
    """Two parties holding the same feature (and none the other) would project new rows
    on the wrong columns."""
    X = _data(3, n=30, d=4)
    path = tmp_path / "v.npz"
    save_model(VerticalKernelPCA(n_components=2, gamma=0.5).fit(X), path)
    _, arrays = _members(path)
    _refused(_rewrite(path, tmp_path / "overlap.npz",
                      **{"feature_block.1": arrays["feature_block.0"]}),
             "its feature blocks do not split the 4 features between the parties")
