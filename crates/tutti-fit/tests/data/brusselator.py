"""Reference solution of the 2-D Brusselator for tests/brusselator.rs, written here from the
definition in DifferentialEquations.jl's tutorial "Solving Large Stiff Equations" (numpy, not
tutti's code):

    du/dt = B + u^2 v - (A + 1) u + alpha Lap(u) + f(x, y, t)
    dv/dt = A u - u^2 v + alpha Lap(v)

on x, y in linspace(0, 1, N), periodic (the last point's neighbour is the first), Lap the
5-point Laplacian over dx^2 with dx = 1 / (N - 1), A = 3.4, B = 1, alpha = 10, f = 5 on the
disc (x - 0.3)^2 + (y - 0.6)^2 <= 0.1^2 for t >= 1.1; u0 = 22 (y (1 - y))^1.5,
v0 = 27 (x (1 - x))^1.5. The state is interleaved (u, v) per point, point i + N j (x index
i). Integrated by scipy's Radau at rtol 1e-10, atol 1e-12, in two pieces split at the
forcing's switch (t = 1.1) so that the reference does not depend on how an integrator
steps over it. Run with scipy installed:

    python3 crates/tutti-fit/tests/data/brusselator.py > crates/tutti-fit/tests/data/brusselator.json
"""

import json

import numpy as np
import scipy
from scipy.integrate import solve_ivp

N = 8
A, B, ALPHA = 3.4, 1.0, 10.0
xs = np.linspace(0, 1, N)
X, Y = np.meshgrid(xs, xs, indexing="xy")  # X[j, i] = xs[i], Y[j, i] = xs[j]
DISC = ((X - 0.3) ** 2 + (Y - 0.6) ** 2) <= 0.1**2
SCALE = ALPHA * (N - 1) ** 2


def lap(w):
    return (np.roll(w, 1, 0) + np.roll(w, -1, 0) + np.roll(w, 1, 1) + np.roll(w, -1, 1)
            - 4 * w)


def f(t, state):
    u = state[0::2].reshape(N, N)
    v = state[1::2].reshape(N, N)
    forcing = 5.0 * DISC if t >= 1.1 else 0.0
    du = B + u * u * v - (A + 1) * u + SCALE * lap(u) + forcing
    dv = A * u - u * u * v + SCALE * lap(v)
    out = np.empty_like(state)
    out[0::2] = du.ravel()
    out[1::2] = dv.ravel()
    return out


u0 = 22 * (Y * (1 - Y)) ** 1.5
v0 = 27 * (X * (1 - X)) ** 1.5
state = np.empty(2 * N * N)
state[0::2] = u0.ravel()
state[1::2] = v0.ravel()
first = solve_ivp(f, (0, 1.1), state, method="Radau", t_eval=[1.0, 1.1], rtol=1e-10,
                  atol=1e-12)
second = solve_ivp(f, (1.1, 11.5), first.y[:, -1], method="Radau", t_eval=[2.0, 11.5],
                   rtol=1e-10, atol=1e-12)
assert first.success and second.success
print(json.dumps({
    "scipy": scipy.__version__,
    "n": N,
    "t": [1.0, 2.0, 11.5],
    "y": [first.y[:, 0].tolist(), second.y[:, 0].tolist(), second.y[:, 1].tolist()],
}))
