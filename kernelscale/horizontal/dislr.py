"""disLR: the best rank-k subspace inside span(phi(Y)) (Algorithm 3 of paper 001).

With ``F`` a stable factor of ``K_YY`` (``F^T K_YY F = I``), ``Q = phi(Y) F`` is an
orthonormal basis of span(phi(Y)) and the projected data are
``Pi_i = F^T k(Y, A_i)``. Workers never need ``F``: everything they send is
linear in ``k(Y, A_i)``, and the master applies ``F`` itself.

* ``messages='gram'``: worker i sends ``k(Y, A_i) k(A_i, Y)`` (|Y|(|Y|+1)/2 words);
  the master forms ``Pi Pi^T = F^T (sum_i ...) F`` exactly.
* ``messages='sketch'``: worker i sends ``k(Y, A_i) T_i`` (|Y| x w, the paper's
  ``Pi_i T_i`` before ``F^T``), or ``k(Y, A_i)`` when n_i <= w.

Centring: with ``m = (1/n) sum_a k(Y, a)`` the centred projections are
``F^T (k(Y, A_i) - m 1^T)``; the workers add their row sums ``k(Y, A_i) 1`` and,
in sketch mode, the column sums ``1^T T_i``, so no extra round is needed.

Total energy: each worker adds ``sum_a k(a, a)`` over its rows (one word) to the
same reply, so the master knows the trace of the kernel matrix, against which
the eigenvalues are shares (``explained_variance_ratio_``). Centred, the master
subtracts ``n ||Q^T mu||^2 = n ||F^T m||^2``, the squared norm of the mean's
projection on span(phi(Y)): the exact ``n ||mu||^2`` would need k(a, b) for
every pair of points across workers. The centred trace is then
``sum_a ||phi(a) - P_Y mu||^2``, the energy around the centre the model uses;
it exceeds the exact centred trace by ``n ||mu - P_Y mu||^2`` (0 when Y spans
the mean), so the shares are, if anything, slightly underestimated.

User-supplied landmarks (:func:`landmark_dislr`): the same protocol on a given
Y, sent to every worker with the model (kind ``model``, not ``raw_points``: they
are the user's points, not the workers' data).
"""

from __future__ import annotations

import warnings

import numpy as np

from kernelscale.arrays import device, is_device_array, namespace, rows, to_device_of, to_host
from kernelscale.eigensolvers import top_eigenpairs, top_left_singular_vectors
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import pack_symmetric, unpack_symmetric, whitening
from kernelscale.model import KernelPCAModel
from kernelscale.runtime import Cluster, Tagged, WorkerState
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.cluster import one_blas_thread
from kernelscale.runtime.lost import answered
from kernelscale.runtime.steps import worker_step
from kernelscale.sketches import make_sketch


def cap_at_rank(coef: np.ndarray, eigenvalues: np.ndarray, n_components: int, what: str,
                stacklevel: int = 3):
    """Zero-pad the components beyond the numerical rank, with a ``UserWarning``.

    When ``what`` has numerical rank r < k (e.g. a linear kernel on data of
    rank r, or fewer distinct landmarks than k), only r directions exist: the
    model keeps them and adds k - r zero components (zero coefficients,
    eigenvalue 0), so ``transform`` still returns k columns, the last k - r of
    them 0.
    """
    rank = coef.shape[1]
    if rank >= n_components:
        return coef, eigenvalues
    warnings.warn(
        f"{what} has numerical rank {rank} < n_components={n_components}: components "
        f"{rank + 1}..{n_components} are zero (the landmarks, or the data, span fewer "
        "directions in feature space).", UserWarning, stacklevel=stacklevel)
    pad = n_components - rank
    return (np.hstack([coef, np.zeros((coef.shape[0], pad))]),
            np.concatenate([eigenvalues, np.zeros(pad)]))


def _projection_disclosure(message) -> str:
    """Gram sums are aggregates; the paper's sketched message is ``k(Y, A_i)`` itself
    when ``n_i <= w`` (a kernel column per row)."""
    return "aggregates" if message["model"]["messages"] == "gram" else "per-row"


@worker_step(discloses=_projection_disclosure)
def projection_step(state: WorkerState, message):
    """Form Y = P + new points; reply the disLR message for ``k(Y, A_i)`` and ``sum k(a, a)``.

    ``message`` is ``Tagged(raw_points=new_points, model=config, seed=sketch_seed)``;
    user-supplied landmarks come in ``config['landmarks']`` instead of ``raw_points``.
    """
    from kernelscale.horizontal.draws import stack_rows

    config = message["model"]
    new_points = message["raw_points"] if "raw_points" in message else config["landmarks"]
    kept = getattr(state, "held_landmarks", None)
    Y = new_points if kept is None else stack_rows([kept, new_points])
    state.landmarks = Y
    kernel = Kernel.from_dict(config["kernel"])
    X, chunk = state.data, config["chunk_size"]
    n_y = Y.shape[0]
    on_device = is_device_array(X)
    if on_device:  # Y once on the partition's device; sums there in float64
        xp = namespace(X)
        Y = to_device_of(Y, X)
        zeros = lambda shape: xp.zeros(shape, dtype=xp.float64, device=device(X))  # noqa: E731
        column_sum = lambda block: xp.sum(block, axis=0)  # noqa: E731
        total = lambda values: xp.sum(xp.astype(values, xp.float64))  # noqa: E731
    else:
        zeros, column_sum, total = np.zeros, _column_sum, _total
    row_sums = zeros(n_y)
    diag_sum = 0.0  # sum_a k(a, a): the trace, for the shares of energy
    sketched = config["messages"] == "sketch" and X.shape[0] > config["sketch_width"]
    if config["messages"] == "gram":
        acc = zeros((n_y, n_y))
    elif sketched:
        sketch = make_sketch("countsketch+gaussian", X.shape[0], config["sketch_width"],
                             message["seed"])
        acc = 0.0  # summed in the sketch's intermediate space, mapped by finish()
    else:
        acc = np.empty((X.shape[0], n_y))

    # On a device the chunk is one block: sub-blocks would cost a launch and a
    # host sync each (on the host the kernel's own 4,096-row blocks stay).
    block_rows = chunk if on_device else DEFAULT_CHUNK_SIZE

    def project_chunk(start, stop):
        block = kernel(rows(X, start, stop), Y, chunk_size=block_rows)  # k(A_chunk, Y)
        diag = total(kernel.diag(rows(X, start, stop)))
        if config["messages"] == "gram":
            # numpy sends A.T @ A to BLAS's SYRK (half the flops of a GEMM). Worker
            # steps run with one BLAS thread, where SYRK is correct on this platform
            # (DESIGN.md, "Known hazards": it fails with 2 threads, on far larger blocks).
            return column_sum(block), diag, block.T @ block
        # The paper's sketches (and an unsketched block) are applied on the host.
        if sketched:
            return column_sum(block), diag, sketch.left_partial(to_host(block), start)
        return column_sum(block), diag, to_host(block)

    for start, stop, (block_sums, diag, part) in map_chunks(project_chunk, X.shape[0], chunk):
        row_sums += block_sums
        diag_sum += diag
        if config["messages"] == "gram" or sketched:
            acc += part
        else:
            acc[start:stop] = part
    if on_device:  # the message boundary: what is sent lives on the host
        row_sums, diag_sum = to_host(row_sums), float(diag_sum)
        if config["messages"] == "gram":
            acc = to_host(acc)
    if config["messages"] == "gram":
        message = pack_symmetric(acc)
    elif sketched:
        message = sketch.finish(acc).T  # |Y| x w
    else:
        message = acc.T  # |Y| x n_i, unsketched
    if not config["center"]:
        return Tagged(sketch=message, scalars=diag_sum)
    # 1^T T_i, needed to centre a sketched message (T_i = I when unsketched).
    column_sums = sketch.left(np.ones((X.shape[0], 1))).ravel() if sketched else None
    return Tagged(sketch=message, scalars=[row_sums, column_sums, diag_sum])


def _column_sum(block: np.ndarray) -> np.ndarray:
    return block.sum(axis=0)


def _total(values: np.ndarray) -> float:
    return float(values.sum())


@worker_step(discloses="nothing")
def store_model_step(state: WorkerState, coef, center):
    """Keep the components (the paper's final broadcast of W to the workers)."""
    state.coef = coef
    state.center = center


def dislr(cluster: Cluster, Y, new_points, kernel: Kernel, n_components: int, n_samples: int,
          messages: str, center: bool, chunk_size: int, seeds: list[int], rtol: float = 1e-10,
          round_prefix: str = "disLR", landmark_kind: str = "raw_points",
          send_model: bool = True, eigensolver: dict | None = None) -> KernelPCAModel:
    """Run disLR on landmarks ``Y`` (the workers already hold ``Y[:len(Y)-len(new_points)]``).

    Returns the fitted :class:`KernelPCAModel`; ``C = F W`` with ``W`` the top-k
    eigenvectors of ``Pi Pi^T`` (gram) or left singular vectors of ``Pi T`` (sketch).
    ``new_points`` travel as ``landmark_kind``: ``'raw_points'`` (sampled from the
    workers' data) or ``'model'`` (landmarks the user gave). ``send_model=False``
    leaves out the paper's last round, the coefficients to every worker, for a
    caller that sends them with its own next round. ``eigensolver``: the
    keyword arguments of :func:`kernelscale.eigensolvers.top_eigenpairs` for the
    master's |Y| x |Y| problem (default: LAPACK's dense solver); its iterations
    are ``model.info['n_iter']``.
    """
    n_y = Y.shape[0]
    config = {"kernel": kernel.to_dict(), "chunk_size": chunk_size, "messages": messages,
              "center": center, "sketch_width": n_y}
    name = (f"{round_prefix}: k(Y,A_i) k(A_i,Y)" if messages == "gram"
            else f"{round_prefix}: k(Y,A_i) T_i (k(Y,A_i) where n_i <= w)")
    if landmark_kind == "model":
        args = [(Tagged(model={**config, "landmarks": new_points}, seed=s),) for s in seeds]
    else:
        args = [(Tagged(raw_points=new_points, model=config, seed=s),) for s in seeds]
    gram_mode = messages == "gram"
    # Gram mode: the master needs only the sums over workers of k(Y,A_i) k(A_i,Y), of
    # the row sums and of the traces.
    replies = cluster.scatter_map(projection_step, args, round=name, reply_kind="sketch",
                                  reduce="sum" if gram_mode else None)
    if not gram_mode and cluster.lost_workers:  # as a summed round is rescaled
        replies = [_scaled_sketch(r, cluster.rescale_factor()) for r in answered(replies)]
    with one_blas_thread():  # small dense algebra: a second BLAS thread only waits
        coef, eigenvalues, mean, trace, n_iter = _components(
            replies, Y, kernel, n_components, n_samples, gram_mode, center, rtol,
            eigensolver or {})
    if send_model:
        cluster.broadcast_map(store_model_step, coef, mean,
                              round=f"{round_prefix}: components", kind="model",
                              reply_kind="model")
    return KernelPCAModel(kernel=kernel, landmarks=Y, coef=coef, eigenvalues=eigenvalues,
                          center=mean, trace=trace, info={"n_iter": n_iter})


def _scaled_sketch(reply, factor: float) -> dict:
    """A sketch reply scaled for the ratio estimate ``N / N_answered`` of a fit without
    a lost worker: the block by sqrt(factor), so that its Gram, the row sums and the
    trace scale by factor, as a summed (gram) round's sum does."""
    root = np.sqrt(factor)
    block, scalars = reply["sketch"], reply["scalars"]
    if isinstance(scalars, list):  # centred: row sums, 1^T T_i (None: T_i = I), trace
        row_sums, column_sums, trace = scalars
        if column_sums is None:
            column_sums = np.ones(block.shape[1])
        scalars = [row_sums * factor, column_sums * root, trace * factor]
    else:
        scalars = scalars * factor
    return {"sketch": block * root, "scalars": scalars}


def _components(replies, Y, kernel: Kernel, n_components: int, n_samples: int,
                gram_mode: bool, center: bool, rtol: float, eigensolver: dict):
    """The master's side of disLR: ``(C = F W, eigenvalues, mean or None, trace, n_iter)``."""
    n_y = Y.shape[0]
    # Master: Q = phi(Y) F is an orthonormal basis of span(phi(Y)).
    F = whitening(kernel(Y, Y, dtype=np.float64), rtol)
    mean = None
    if gram_mode:
        scalars = replies["scalars"]
    elif center:  # the column sums 1^T T_i differ in size: sum the row sums and traces
        scalars = [sum(r["scalars"][0] for r in replies), None,
                   sum(r["scalars"][-1] for r in replies)]
    else:
        scalars = sum(r["scalars"] for r in replies)
    trace = float(scalars[-1] if center else scalars)
    if center:
        mean = scalars[0] / n_samples
        # n ||P_Y mu||^2: the mean's projection on span(phi(Y)) (module docstring).
        trace -= n_samples * float(np.sum((F.T @ mean) ** 2))
    n_iter = 1
    if F.shape[1] == 0:  # phi(Y) = 0 (e.g. linear kernel, all-zero data): no direction
        eigenvalues, W = np.zeros(0), np.zeros((0, 0))
    elif gram_mode:
        G = unpack_symmetric(replies["sketch"], n_y)
        if center:
            G -= n_samples * np.outer(mean, mean)
        projected = F.T @ G @ F
        projected = (projected + projected.T) / 2.0  # symmetric to round-off: made exact
        eigenvalues, W, n_iter = top_eigenpairs(projected, n_components, **eigensolver,
                                                return_n_iter=True)
    else:
        blocks = []
        for r in replies:
            block = r["sketch"]
            if center:
                column_sums = r["scalars"][1]
                if column_sums is None:
                    column_sums = np.ones(block.shape[1])
                block = block - np.outer(mean, column_sums)
            blocks.append(F.T @ block)
        eigenvalues, W, n_iter = top_left_singular_vectors(
            np.hstack(blocks), n_components, **eigensolver, return_n_iter=True)
    coef, eigenvalues = cap_at_rank(F @ W, eigenvalues, n_components, "span(phi(Y))",
                                    stacklevel=4)
    return coef, eigenvalues, mean, trace, n_iter
