"""Reference fits of an exponential decay with three gross outliers for tests/robust_loss.rs.

    y_i = a exp(-k t_i) + c + noise_i,   (a, k, c) = (5, 1.3, 0.5), sigma = 0.05,

at 30 times in [0, 6], with 3 outliers (+2, -1.5, +3, i.e. 40 to 60 sigma) at points 4, 13
and 22. The residuals are weighted, r_i = (a exp(-k t_i) + c - y_i) / sigma, and each loss
is fitted with scipy's `least_squares` at f_scale = 3 (three standard deviations) from
(4, 1, 0.3), with the analytic Jacobian, by 'trf' and 'dogbox' at xtol = gtol = 1e-15 and
no ftol test (so they stop on the step), and for the linear loss also by 'lm' (MINPACK,
which needs an ftol: 1e-15). Each result records the Gauss-Newton step from it,
`-(J^T J)^-1 g` with scipy's rescaled Jacobian and robust gradient: its distance from the
stationary point, which the test's tolerance is built from. Run with numpy and scipy
installed:

    python3 crates/tutti-fit/tests/data/robust_loss.py > crates/tutti-fit/tests/data/robust_loss.json
"""

import json

import numpy as np
import scipy
from scipy.optimize import least_squares

TRUE = [5.0, 1.3, 0.5]
SIGMA = 0.05
F_SCALE = 3.0
START = [4.0, 1.0, 0.3]
OUTLIERS = {4: 2.0, 13: -1.5, 22: 3.0}
TOLERANCE = 1e-15

t = np.linspace(0.0, 6.0, 30)
rng = np.random.default_rng(20260101)
y = TRUE[0] * np.exp(-TRUE[1] * t) + TRUE[2] + SIGMA * rng.standard_normal(t.size)
for index, shift in OUTLIERS.items():
    y[index] += shift


def residuals(p):
    return (p[0] * np.exp(-p[1] * t) + p[2] - y) / SIGMA


def jacobian(p):
    e = np.exp(-p[1] * t)
    return np.column_stack([e, -p[0] * t * e, np.ones_like(t)]) / SIGMA


def solve(loss, method):
    result = least_squares(
        residuals,
        START,
        jac=jacobian,
        method=method,
        loss=loss,
        f_scale=F_SCALE,
        xtol=TOLERANCE,
        ftol=None if method != "lm" else TOLERANCE,
        gtol=TOLERANCE,
        max_nfev=10000,
    )
    # The Gauss-Newton step from the solution, -(J^T J)^-1 g with scipy's rescaled Jacobian
    # and robust gradient: how far the result still is from the stationary point.
    step = np.linalg.solve(result.jac.T @ result.jac, -result.grad)
    return {
        "x": result.x.tolist(),
        "newton_step": step.tolist(),
        "cost": float(result.cost),
        "status": int(result.status),
        "nfev": int(result.nfev),
        "optimality": float(result.optimality),
    }


fits = {}
for loss in ["linear", "huber", "soft_l1", "cauchy", "arctan"]:
    fits[loss] = {method: solve(loss, method) for method in ["trf", "dogbox"]}
fits["linear"]["lm"] = solve("linear", "lm")

print(
    json.dumps(
        {
            "scipy": scipy.__version__,
            "numpy": np.__version__,
            "true": TRUE,
            "sigma": SIGMA,
            "f_scale": F_SCALE,
            "start": START,
            "tolerance": TOLERANCE,
            "outliers": sorted(OUTLIERS),
            "t": t.tolist(),
            "y": y.tolist(),
            "fits": fits,
        },
        indent=1,
    )
)
