"""Reference values of Robertson's chemical kinetics problem for tests/bdf.rs.

    y1' = -0.04 y1 + 1e4 y2 y3
    y2' =  0.04 y1 - 1e4 y2 y3 - 3e7 y2^2
    y3' =  3e7 y2^2,        y(0) = (1, 0, 0)

The reference is scipy's Radau IIA (order 5) at rtol 1e-12, atol 1e-20 with the analytic
Jacobian; scipy's BDF (the method tutti's integrator follows) at rtol 1e-6, atol 1e-10 is
recorded beside it with its step counts. Run with scipy installed:

    python3 crates/tutti-fit/tests/data/robertson.py > crates/tutti-fit/tests/data/robertson.json
"""

import json

import numpy as np
import scipy
from scipy.integrate import solve_ivp


def f(t, y):
    return [
        -0.04 * y[0] + 1e4 * y[1] * y[2],
        0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
        3e7 * y[1] ** 2,
    ]


def jac(t, y):
    return [
        [-0.04, 1e4 * y[2], 1e4 * y[1]],
        [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
        [0.0, 6e7 * y[1], 0.0],
    ]


t_eval = [0.4, 4.0, 40.0, 400.0, 4e3, 4e4, 4e5]
reference = solve_ivp(f, (0, t_eval[-1]), [1, 0, 0], method="Radau", t_eval=t_eval,
                      rtol=1e-12, atol=1e-20, jac=jac)
bdf = solve_ivp(f, (0, t_eval[-1]), [1, 0, 0], method="BDF", t_eval=t_eval,
                rtol=1e-6, atol=1e-10, jac=jac)
assert reference.success and bdf.success
print(json.dumps({
    "scipy": scipy.__version__,
    "t": t_eval,
    "radau_rtol_1e-12": reference.y.T.tolist(),
    "scipy_bdf_rtol_1e-6_atol_1e-10": {
        "y": bdf.y.T.tolist(), "nfev": int(bdf.nfev), "njev": int(bdf.njev), "nlu": int(bdf.nlu),
    },
}, indent=1))
