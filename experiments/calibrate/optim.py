"""A small Nelder-Mead minimiser (numpy only: the harness does not depend on scipy)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def nelder_mead(
    f: Callable[[np.ndarray], float],
    x0: np.ndarray,
    *,
    step: float | np.ndarray = 0.5,
    max_iter: int = 3000,
    tol: float = 1e-7,
) -> np.ndarray:
    """The minimiser of ``f`` from ``x0`` (adaptive coefficients, Gao and Han 2012, which
    keep the simplex from collapsing in a dozen dimensions)."""
    n = len(x0)
    alpha, gamma = 1.0, 1.0 + 2.0 / n
    rho, sigma = 0.75 - 1.0 / (2 * n), 1.0 - 1.0 / n
    steps = np.broadcast_to(np.asarray(step, dtype=float), (n,))
    simplex = np.vstack([x0] + [x0 + steps[i] * np.eye(n)[i] for i in range(n)])
    values = np.array([f(x) for x in simplex])
    for _ in range(max_iter):
        order = np.argsort(values)
        simplex, values = simplex[order], values[order]
        if abs(values[-1] - values[0]) <= tol * (1 + abs(values[0])):
            break
        centroid = simplex[:-1].mean(axis=0)
        xr = centroid + alpha * (centroid - simplex[-1])
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + gamma * (xr - centroid)
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            outside = fr < values[-1]
            xc = centroid + rho * ((xr if outside else simplex[-1]) - centroid)
            fc = f(xc)
            if fc < (fr if outside else values[-1]):
                simplex[-1], values[-1] = xc, fc
            else:
                simplex[1:] = simplex[0] + sigma * (simplex[1:] - simplex[0])
                values[1:] = [f(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]
