"""The figures of tutti's docs, drawn from the benchmark results.

    python3 scripts/plots.py --results benches/results --out docs/figures

(`cargo xtask plots` runs it in a virtualenv with matplotlib.) Every figure is one function
that reads the JSON written by a bench (`benches/src/bin/*.rs`, `benches/peers/*.py`) and
writes one SVG; the figures are never edited by hand. The output is deterministic: the same
JSON and the same matplotlib give the same bytes (fixed SVG id salt, no date, text as text).

A result file that is absent, or that lacks a field a figure needs, skips that figure with a
message (and removes its old SVG, so no figure outlives its data); a file that is not valid
JSON skips its figures too, keeps their old SVGs, and makes the script exit with status 1
after drawing the figures that do not need it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("svg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import Formatter  # noqa: E402

plt.rcParams.update(
    {
        "svg.hashsalt": "tutti-figures",
        "svg.fonttype": "none",
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "legend.fontsize": 7.5,
        "figure.dpi": 100,
    }
)

IDEAL_STYLE = {"color": "0.35", "linestyle": "--", "linewidth": 1}
SHARED_STYLE = {"color": "0.55", "linestyle": ":", "linewidth": 1.2}


class Missing(Exception):
    """A result file or a field a figure needs is not there."""


class Malformed(Missing):
    """A result file is not valid JSON (the script fails at the end)."""


def need(obj, *path):
    """obj[path[0]][path[1]]...; a missing step raises Missing naming the path."""
    for depth, key in enumerate(path):
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError):
            shown = "".join(f"[{step!r}]" for step in path[: depth + 1])
            raise Missing(f"no field {shown}") from None
    return obj


def first(obj, *names):
    """The value of the first of `names` that obj has (a field renamed between bench versions)."""
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name], name
    raise Missing(f"none of the fields {', '.join(names)}")


class Results:
    """The JSON files of the results directory, loaded on demand."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.malformed: list[str] = []
        self.cache: dict[str, object] = {}
        self.last = ""

    def __getitem__(self, name: str):
        self.last = f"{name}.json"
        if name not in self.cache:
            path = self.directory / f"{name}.json"
            if not path.is_file():
                self.cache[name] = None
            else:
                try:
                    self.cache[name] = json.loads(path.read_text())
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    self.malformed.append(f"{path}: {err}")
                    self.cache[name] = None
        value = self.cache[name]
        if value is None:
            path = self.directory / f"{name}.json"
            if path.is_file():
                raise Malformed("not valid JSON")
            raise Missing(f"no {path}")
        return value


def machine(meta: dict, load=None) -> str:
    """One line naming the machine and the run, from a `_meta` block."""
    parts = []
    host = meta.get("host")
    cpu = meta.get("cpu")
    cores = meta.get("cores")
    memory = meta.get("host_memory_bytes")
    node = ", ".join(
        str(part)
        for part in (
            host,
            cpu,
            f"{cores} cores" if cores is not None else None,
            f"{memory / 2**30:.1f} GiB" if memory else None,
        )
        if part
    )
    if node:
        parts.append(node)
    run = []
    if meta.get("git_commit"):
        run.append(f"commit {meta['git_commit'][:7]}")
    if meta.get("unix_time"):
        stamp = datetime.datetime.fromtimestamp(meta["unix_time"], datetime.timezone.utc)
        run.append(stamp.strftime("%Y-%m-%d"))
    if meta.get("cuda_built") is False:
        run.append("CPU build")
    if run:
        parts.append(", ".join(run))
    if load is not None:
        parts.append(f"load average {load}")
    return "; ".join(parts)


def footnote(fig, *lines: str) -> None:
    """Small text under the axes: the inputs and the machine, wrapped to the figure's width."""
    width = max(60, int(fig.get_figwidth() * 72 / 3.9))
    text = "\n".join(textwrap.fill(line, width) for line in lines if line)
    fig.text(0.01, 0.0, text, fontsize=7, color="0.3", ha="left", va="top")


class PlainLog(Formatter):
    """Log-axis labels as plain text ("0.3", "100", "1e-08"): the decades, plus 2 and 5 of
    each decade on an axis spanning under two decades, plus every minor tick under 0.7."""

    def __init__(self, minor: bool):
        self.minor = minor

    def __call__(self, x, pos=None):
        if x <= 0:
            return ""
        low, high = sorted(self.axis.get_view_interval())
        span = math.log10(high / low) if low > 0 else 99.0
        exponent = math.floor(math.log10(x) + 1e-9)
        mantissa = round(x / 10**exponent, 6)
        if self.minor and span >= 2:
            return ""
        if self.minor and span >= 0.7 and mantissa not in (2.0, 5.0):
            return ""
        if -3 <= exponent <= 3:
            return f"{x:.{max(0, -exponent)}f}"
        return f"{mantissa:g}e{exponent}"


def log_axis(ax, which: str) -> None:
    """A base-10 log scale on ax's `which` axis ("x" or "y") with plain-text labels."""
    getattr(ax, f"set_{which}scale")("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(PlainLog(minor=False))
    axis.set_minor_formatter(PlainLog(minor=True))


def bottom_legend(fig, handles, labels, ncol: int) -> None:
    """One legend for the whole figure, at its foot: in the band that
    `fig.tight_layout(rect=(0, band, 1, 1))` keeps free under the axes."""
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
               fontsize=7, frameon=False)


def save(fig, out: Path, name: str) -> Path:
    path = out / f"{name}.svg"
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return path


def speedup_guides(ax, max_devices: int, baseline: str) -> None:
    """The ideal line (speedup = devices) and the line of no gain (all simulated devices share
    the cores that one device already holds)."""
    xs = [1, max_devices]
    ax.plot(xs, xs, label="ideal: speedup = devices", **IDEAL_STYLE)
    ax.axhline(1.0, label=baseline, **SHARED_STYLE)
    ax.set_xticks(range(1, max_devices + 1))
    ax.set_ylim(bottom=0)


def simulated_note(meta: dict) -> str:
    cores = meta.get("cores")
    return (
        f"Simulated devices (Resources::cpu(n)) split the host's {cores} cores; "
        "one device already holds them all."
        if cores
        else "Simulated devices (Resources::cpu(n)) split the host's cores."
    )


# ---------------------------------------------------------------------------------------
# FMM


def fmm_sizes(results: Results, out: Path) -> Path:
    """FMM and direct-sum time against N, and the FMM's time per body (fmm_scaling.json)."""
    data = results["fmm_scaling"]
    meta = need(data, "_meta")
    sizes = need(data, "sizes")
    options = data.get("options", {})
    fig, (ax_time, ax_body) = plt.subplots(1, 2, figsize=(10, 4))
    for color, distribution in zip(("C0", "C1"), ("uniform", "plummer")):
        rows = sorted(
            (row for row in sizes if need(row, "distribution") == distribution),
            key=lambda row: need(row, "n"),
        )
        if not rows:
            continue
        n = [need(row, "n") for row in rows]
        ax_time.plot(n, [need(row, "fmm_seconds") for row in rows], "o-", color=color,
                     label=f"FMM, {distribution}")
        ax_time.plot(n, [need(row, "direct_seconds") for row in rows], "--", color=color,
                     label=f"direct sum, {distribution}")
        for row in rows:
            extrapolated = need(row, "direct_extrapolated")
            ax_time.plot(need(row, "n"), need(row, "direct_seconds"), "s", color=color,
                         markerfacecolor="none" if extrapolated else color)
        ax_body.plot(n, [need(row, "us_per_body") for row in rows], "o-", color=color,
                     label=distribution)
        for row in rows:
            ax_body.annotate(f"{need(row, 'accel_error'):.1e}", (need(row, "n"),
                             need(row, "us_per_body")), textcoords="offset points",
                             xytext=(0, 6), ha="center", fontsize=6.5, color=color)
    ax_time.plot([], [], "s", color="0.4", markerfacecolor="none",
                 label="direct sum extrapolated from 1000 targets")
    log_axis(ax_time, "x")
    log_axis(ax_time, "y")
    ax_time.set_xlabel("bodies N")
    ax_time.set_ylabel("wall time (s)")
    ax_time.set_title("FMM against the direct sum")
    ax_time.legend()
    log_axis(ax_body, "x")
    ax_body.set_ylim(0, ax_body.get_ylim()[1] * 1.12)
    ax_body.margins(x=0.1)
    ax_body.set_xlabel("bodies N")
    ax_body.set_ylabel("FMM time per body (µs)")
    ax_body.set_title("FMM time per body (labels: acceleration error)")
    ax_body.legend()
    footnote(
        fig,
        f"fmm_scaling.json: order p = {options.get('order', '?')}, theta = "
        f"{options.get('theta', '?')}, leaf size {options.get('leaf_size', '?')}; one device "
        "with every core. Errors: relative L2 of accelerations against the direct sum.",
        machine(meta),
    )
    return save(fig, out, "fmm_sizes")


def fmm_devices(results: Results, out: Path) -> Path:
    """The FMM on 1, 2, 4 simulated devices: time and speedup (fmm_scaling.json)."""
    data = results["fmm_scaling"]
    meta = need(data, "_meta")
    rows = sorted(need(data, "devices"), key=lambda row: need(row, "devices"))
    if not rows:
        raise Missing("no rows in ['devices']")
    devices = [need(row, "devices") for row in rows]
    seconds = [need(row, "seconds") for row in rows]
    case = need(rows[0], "case")
    fig, (ax_time, ax_speed) = plt.subplots(1, 2, figsize=(9, 3.8))
    ax_time.bar([str(d) for d in devices], seconds, color="C0", width=0.5)
    for i, (row, value) in enumerate(zip(rows, seconds)):
        same = "\nbit-identical to 1 device" if row.get("identical_to_one_device") else ""
        ax_time.annotate(f"{value:.1f} s{same}", (i, value), textcoords="offset points",
                         xytext=(0, 3), ha="center", fontsize=7)
    ax_time.set_xlabel("simulated devices")
    ax_time.set_ylabel("wall time (s)")
    ax_time.set_title(f"FMM, {case}: time")
    ax_time.set_ylim(top=max(seconds) * 1.3)
    speedup = [seconds[0] / value for value in seconds]
    ax_speed.plot(devices, speedup, "o-", color="C0", label="measured")
    speedup_guides(ax_speed, max(devices), "no gain: the same cores shared")
    ax_speed.set_xlabel("simulated devices")
    ax_speed.set_ylabel("speedup over 1 device")
    ax_speed.set_title(f"FMM, {case}: speedup")
    ax_speed.legend()
    footnote(fig, "fmm_scaling.json. " + simulated_note(meta), machine(meta))
    return save(fig, out, "fmm_devices")


def fmm3d_runs(data: dict) -> list[dict]:
    """The runs of fmm3d_compare.json: a list under "runs", or one run at the top level (the
    layout `benches/peers/fmm3d_compare.py` writes)."""
    if "runs" in data:
        return list(need(data, "runs"))
    return [{"rows": need(data, "rows"), "meta": data.get("_meta", {}), "note": ""}]


def fmm_vs_fmm3d(results: Results, out: Path) -> Path:
    """Accuracy against time, tutti's FMM beside FMM3D, per case (fmm3d_compare.json)."""
    data = results["fmm3d_compare"]
    runs = fmm3d_runs(data)
    cases: list[str] = []
    for run in runs:
        for row in need(run, "rows"):
            if "fmm3d_all" in row and need(row, "case") not in cases:
                cases.append(row["case"])
    if not cases:
        raise Missing("no row with ['fmm3d_all']")
    order = {"uniform_10k": 0, "plummer_10k": 1, "uniform_100k": 2, "plummer_100k": 3}
    cases.sort(key=lambda case: (order.get(case, 99), case))
    columns = 2
    rows_n = (len(cases) + columns - 1) // columns
    fig, axes = plt.subplots(rows_n, columns, figsize=(10, 3.6 * rows_n), squeeze=False)
    fills = ["full", "none"]
    notes = []
    for run_index, run in enumerate(runs):
        meta = run.get("meta", {})
        note = str(run.get("note", "")).strip()
        if not note.startswith("run"):
            note = f"run {run_index + 1}: {note}".strip()
        if "fmm3dpy" in meta:
            note += (f" (fmm3dpy {meta['fmm3dpy']}, OMP_NUM_THREADS="
                     f"{meta.get('omp_num_threads')})")
        notes.append(note)
    for ax, case in zip(axes.flat, cases):
        annotated = False
        for run_index, run in enumerate(runs):
            for row in need(run, "rows"):
                if row.get("case") != case or "fmm3d_all" not in row:
                    continue
                fill = fills[min(run_index, len(fills) - 1)]
                peer = sorted(need(row, "fmm3d_all"), key=lambda r: -need(r, "eps"))
                ours = sorted(need(row, "tutti_all"), key=lambda r: need(r, "order"))
                style = "-" if run_index == 0 else ":"
                # FMM3D's time is not monotone in eps: points, not a line.
                eps = f"{need(peer[0], 'eps'):.0e} ... {need(peer[-1], 'eps'):.0e}" if peer else ""
                orders = ", ".join(str(need(r, "order")) for r in ours)
                ax.plot([need(r, "accel_error") for r in peer], [need(r, "seconds") for r in peer],
                        linestyle="none", marker="s", color="C1", fillstyle=fill,
                        label=f"FMM3D, eps = {eps} (run {run_index + 1})")
                ax.plot([need(r, "accel_error") for r in ours], [need(r, "seconds") for r in ours],
                        style, marker="o", color="C0", fillstyle=fill,
                        label=f"tutti, p = {orders} (run {run_index + 1})")
                if not annotated:
                    annotated = True
                    for r in ours:
                        ax.annotate(f"p={need(r, 'order')}", (r["accel_error"], r["seconds"]),
                                    textcoords="offset points", xytext=(4, -9), fontsize=6.5,
                                    color="C0")
                    for r in peer:
                        ax.annotate(f"{need(r, 'eps'):.0e}", (r["accel_error"], r["seconds"]),
                                    textcoords="offset points", xytext=(4, 2), fontsize=6,
                                    color="C1")
        n = case.split("_")[-1].replace("10k", "10^4").replace("100k", "10^5")
        ax.set_title(f"{case.split('_')[0]}, N = {n}")
        log_axis(ax, "x")
        log_axis(ax, "y")
        ax.set_xlabel("relative L2 error of accelerations (1000 targets)")
        ax.set_ylabel("wall time (s)")
    for ax in list(axes.flat)[len(cases):]:
        ax.set_visible(False)
    fig.suptitle("FMM accuracy against time: tutti beside FMM3D, same points and cores "
                 "(lower left is better; labels: tutti's order p, FMM3D's eps)", fontsize=10)
    # The panel with the most runs has every entry of the legend.
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes.flat),
                          key=lambda pair: len(pair[1]))
    band = 0.09
    fig.tight_layout(rect=(0, band, 1, 1))
    bottom_legend(fig, handles, labels, ncol=2)
    meta = data.get("_meta") or runs[-1].get("meta", {})
    footnote(fig, "fmm3d_compare.json; " + "; ".join(notes), machine(meta))
    return save(fig, out, "fmm_vs_fmm3d")


# ---------------------------------------------------------------------------------------
# sweep


def short_case(case: str) -> str:
    """A compact title for a sweep case."""
    case = case.replace("Heisenberg XXZ (n = 32) x random MPS, ", "XXZ x MPS, n 32, ")
    case = case.replace("depth-3 stack: three random MPOs (D = 3) x random MPS (D = 16), n = 16",
                        "3 random MPOs (D 3) x MPS (D 16), n 16")
    return case.replace("D_psi", "D_ψ")


def sweep_exact(results: Results, out: Path) -> Path:
    """SRC against contract-then-truncate: time and error per case (sweep_compare.json)."""
    data = results["sweep_compare"]
    meta = need(data, "_meta")
    cases = need(data, "cases")
    if not cases:
        raise Missing("no rows in ['cases']")
    labels = [short_case(need(case, "case")) + f", χ {need(case, 'chi')}" for case in cases]
    src_s = [need(case, "src_seconds") for case in cases]
    exact_s = [need(case, "exact_seconds") for case in cases]
    src_e = [need(case, "src_error") for case in cases]
    exact_e = [need(case, "optimal_error") for case in cases]
    y = list(range(len(cases)))
    fig, (ax_time, ax_err) = plt.subplots(1, 2, figsize=(10, 0.7 * len(cases) + 2.2),
                                          sharey=True)
    h = 0.38
    ax_time.barh([v - h / 2 for v in y], src_s, h, color="C0", label="SRC (sweep)")
    ax_time.barh([v + h / 2 for v in y], exact_s, h, color="C3",
                 label="exact: contract, then SVD truncation")
    for v, a, b in zip(y, src_s, exact_s):
        ax_time.annotate(f"{b / a:.0f}x faster", (a, v - h / 2), textcoords="offset points",
                         xytext=(3, -3), fontsize=7)
    log_axis(ax_time, "x")
    ax_time.set_xlabel("wall time (s)")
    ax_time.set_yticks(y, labels)
    ax_time.invert_yaxis()
    ax_time.set_title("time")
    ax_time.legend(loc="lower right")
    ax_err.barh([v - h / 2 for v in y], src_e, h, color="C0", label="SRC")
    ax_err.barh([v + h / 2 for v in y], exact_e, h, color="C3", label="SVD truncation (optimal)")
    ax_err.set_xlabel("relative error ||y - A ψ|| / ||A ψ||")
    ax_err.set_title("error against the exact product")
    ax_err.legend(loc="lower right")
    load = ""
    if "load_average_before" in data and "load_average_after" in data:
        load = (f"load average {data['load_average_before'][0]} before, "
                f"{data['load_average_after'][0]} after")
    fig.suptitle("sweep: SRC beside the exact compression (sweep_compare)", fontsize=10)
    fig.tight_layout()
    footnote(fig, "sweep_compare.json; chi = bond kept, no oversampling, seed 1, "
                  "plain path on one device with every core.",
             machine(meta, None) + (f"; {load}" if load else ""))
    return save(fig, out, "sweep_exact")


def sweep_devices(results: Results, out: Path) -> Path:
    """SRC on 1, 2, 4 simulated devices per case (sweep_compare.json)."""
    data = results["sweep_compare"]
    meta = need(data, "_meta")
    cases = need(data, "cases")
    fig, (ax_time, ax_speed) = plt.subplots(1, 2, figsize=(10, 4))
    max_devices = 1
    differences = []
    for index, case in enumerate(cases):
        rows = sorted(need(case, "devices"), key=lambda row: need(row, "devices"))
        devices = [need(row, "devices") for row in rows]
        differences += [row["difference"] for row in rows if "difference" in row]
        seconds = [need(row, "seconds") for row in rows]
        max_devices = max(max_devices, *devices)
        label = short_case(need(case, "case"))
        ax_time.plot(devices, seconds, "o-", color=f"C{index}", label=label)
        ax_speed.plot(devices, [seconds[0] / s for s in seconds], "o-", color=f"C{index}",
                      label=label)
    log_axis(ax_time, "y")
    ax_time.set_xticks(range(1, max_devices + 1))
    ax_time.set_xlabel("simulated devices")
    ax_time.set_ylabel("wall time (s)")
    ax_time.set_title("SRC time")
    speedup_guides(ax_speed, max_devices, "no gain: the same cores shared")
    ax_speed.set_xlabel("simulated devices")
    ax_speed.set_ylabel("speedup over 1 device")
    ax_speed.set_title("SRC speedup")
    fig.suptitle("sweep: SRC split among simulated devices (sweep_compare)", fontsize=10)
    band = 0.16
    fig.tight_layout(rect=(0, band, 1, 1))
    bottom_legend(fig, *ax_speed.get_legend_handles_labels(), ncol=2)
    agreement = (f" Largest relative difference of a split result from the plain path: "
                 f"{max(differences):.1e}." if differences else "")
    footnote(fig, "sweep_compare.json. " + simulated_note(meta) + agreement, machine(meta))
    return save(fig, out, "sweep_devices")


SWEEP_GROUP_MARKERS = {"src": "o", "src-os": "s", "other": "^"}

# One color per method of sweep_peers.py, shades of one hue per library; others get the rest.
SWEEP_METHOD_COLORS = {
    "tutti src (1 device)": "#1f77b4",
    "tutti src (2 devices)": "#7fb8e6",
    "tutti src + oversample": "#0b3c6b",
    "src-method src": "#2ca02c",
    "src-method src, oversample=None": "#135e13",
    "quimb src": "#d62728",
    "quimb src-oversample": "#7a1010",
    "quimb zipup": "#9467bd",
    "quimb fit": "#8c564b",
    "quimb direct (contract + SVD truncation)": "#e377c2",
    "quimb MPO.apply(compress=True)": "#7f7f7f",
}
SPARE_COLORS = ("#bcbd22", "#17becf", "#ff7f0e", "#000000")


def method_family(method: str) -> str:
    """A method's name without the oversampled width, the same in every case."""
    return re.sub(r" to \d+$| \(\d+\)$", "", method)


def sweep_peers(results: Results, out: Path) -> Path:
    """Error against time of every method, per case and thread count (sweep_peers.json)."""
    data = results["sweep_peers"]
    by_threads = need(data, "by_threads")
    threads = sorted(by_threads, key=int)
    if not threads:
        raise Missing("no entries in ['by_threads']")
    case_names: list[str] = []
    families: list[str] = []
    for count in threads:
        for case in need(by_threads, count, "cases"):
            if need(case, "case") not in case_names:
                case_names.append(case["case"])
            for method in need(case, "methods"):
                family = method_family(need(method, "method"))
                if family not in families:
                    families.append(family)
    spare = iter(SPARE_COLORS * len(families))
    colors = {family: SWEEP_METHOD_COLORS.get(family) or next(spare) for family in families}
    fig, axes = plt.subplots(len(threads), len(case_names),
                             figsize=(3.2 * len(case_names), 3.0 * len(threads) + 1.2),
                             squeeze=False)
    handles = {}
    notes = []
    for row_index, count in enumerate(threads):
        entry = need(by_threads, count)
        meta = entry.get("_meta", {})
        end_load = meta.get("load_average_end")
        notes.append(
            f"{count} thread(s): BLAS {meta.get('blas', '?')} with {meta.get('blas_threads', '?')}"
            f" thread(s), pinned cores {meta.get('pinned_cores', '?')}"
            + (f", load average at the end {end_load[0]:.1f}" if end_load else "")
        )
        for case in need(entry, "cases"):
            ax = axes[row_index][case_names.index(case["case"])]
            for method in need(case, "methods"):
                name = need(method, "method")
                family = method_family(name)
                marker = SWEEP_GROUP_MARKERS.get(method.get("group"), "D")
                seconds = need(method, "seconds")
                error = need(method, "error")
                spread = method.get("error_seeds")
                if spread:
                    ax.plot([seconds, seconds], [min(spread), max(spread)], "-",
                            color=colors[family], linewidth=1, alpha=0.6)
                (handle,) = ax.plot(seconds, error, marker, color=colors[family],
                                    markersize=5, linestyle="none")
                handles.setdefault(family, handle)
            log_axis(ax, "x")
            ax.set_title(f"{short_case(case['case'])}, χ {need(case, 'chi')}\n"
                         f"{count} thread(s)", fontsize=8)
            ax.tick_params(labelsize=7)
            if row_index == len(threads) - 1:
                ax.set_xlabel("wall time, best of runs (s)", fontsize=8)
            if case["case"] == case_names[0]:
                ax.set_ylabel("relative error", fontsize=8)
    seeds = need(data, "_meta").get("seeds")
    fig.suptitle("sweep: error against time beside src-method and quimb (lower left is better;"
                 f" bars: SRC error over {seeds or 'several'} seeds)", fontsize=10)
    band = 0.09
    fig.tight_layout(rect=(0, band, 1, 1))
    bottom_legend(fig, [handles[f] for f in families], families, ncol=4)
    meta = need(data, "_meta")
    versions = ", ".join(
        f"{name} {meta[key]}" for name, key in
        (("quimb", "quimb"), ("src-method", "src_method"), ("numpy", "numpy"),
         ("Python", "python")) if key in meta
    )
    footnote(fig, "sweep_peers.json; markers: circle SRC, square SRC oversampled to 1.5 χ "
                  "then truncated, triangle other compressions. " + versions,
             "; ".join(notes), machine(meta))
    return save(fig, out, "sweep_peers")


# ---------------------------------------------------------------------------------------
# adjoint


def adjoint_pyscf(results: Results, out: Path) -> Path:
    """SCF and J/K build times beside PySCF over thread counts (adjoint_threads.json)."""
    data = results["adjoint_threads"]
    meta = need(data, "_meta")
    cases = need(data, "cases")
    if not cases:
        raise Missing("no rows in ['cases']")
    fig, axes = plt.subplots(1, len(cases), figsize=(3.6 * len(cases), 4), squeeze=False)
    pyscf_version = None
    for ax, case in zip(axes[0], cases):
        rows = sorted(need(case, "threads"), key=lambda row: first(row, "devices", "threads")[0])
        counts = [first(row, "devices", "threads")[0] for row in rows]
        axis_name = first(rows[0], "devices", "threads")[1] if rows else "threads"
        ax.plot(counts, [need(row, "scf_seconds") for row in rows], "o-", color="C0",
                label="tutti RHF")
        ax.plot(counts, [need(row, "fock_seconds") for row in rows], "o--", color="C0",
                label="tutti J/K build")
        ax.axhline(need(case, "fock_serial_seconds"), color="C0", linestyle=":", linewidth=1,
                   label="tutti J/K, serial reference")
        pyscf = case.get("pyscf")
        if pyscf and pyscf.get("rows"):
            pyscf_version = pyscf.get("pyscf", pyscf_version)
            prow = sorted(need(pyscf, "rows"), key=lambda row: need(row, "threads"))
            pcounts = [need(row, "threads") for row in prow]
            ax.plot(pcounts, [need(row, "scf_seconds") for row in prow], "s-", color="C1",
                    label="PySCF SCF (ERIs in memory)")
            ax.plot(pcounts, [need(row, "jk_seconds") for row in prow], "s--", color="C1",
                    label="PySCF direct J/K (get_jk)")
            ax.plot(pcounts, [need(row, "jk_incore_seconds") for row in prow], "s:",
                    color="C1", label="PySCF J/K from in-memory ERIs")
        log_axis(ax, "y")
        ax.set_xticks(counts)
        ax.set_xlabel(axis_name)
        ax.set_ylabel("wall time (s)")
        ax.set_title(f"{need(case, 'case')}, {need(case, 'nao')} AOs")
    fig.suptitle("adjoint: RHF and J/K build beside PySCF (adjoint_threads)", fontsize=10)
    band = 0.14
    fig.tight_layout(rect=(0, band, 1, 1))
    bottom_legend(fig, *axes[0][0].get_legend_handles_labels(), ncol=3)
    footnote(fig, "adjoint_threads.json; best of "
                  f"{data.get('repeats', '?')} runs; PySCF "
                  f"{pyscf_version or 'absent'} on the same machine and thread counts.",
             machine(meta, data.get("load_average_1min")))
    return save(fig, out, "adjoint_pyscf")


def adjoint_gradient(results: Results, out: Path) -> Path:
    """The basis-parameter gradient: speedup and cost in SCF energies (adjoint_gradient.json)."""
    data = results["adjoint_gradient"]
    meta = need(data, "_meta")
    cases = need(data, "cases")
    if not cases:
        raise Missing("no rows in ['cases']")
    fig, (ax_speed, ax_cost) = plt.subplots(1, 2, figsize=(10, 4))
    max_count = 1
    axis_name = "threads"
    bars = []
    for index, case in enumerate(cases):
        rows = need(case, "threaded")
        keyed = [(first(row, "devices", "threads"), row) for row in rows]
        keyed.sort(key=lambda item: item[0][0])
        counts = [key[0] for key, _ in keyed]
        axis_name = keyed[0][0][1] if keyed else axis_name
        seconds = [need(row, "gradient_seconds") for _, row in keyed]
        max_count = max(max_count, *counts)
        ax_speed.plot(counts, [seconds[0] / s for s in seconds], "o-", color=f"C{index}",
                      label=f"{need(case, 'case')}, {need(case, 'nao')} AOs")
        for count, row in zip(counts, (row for _, row in keyed)):
            bars.append((f"{case['case']}\n{count} {axis_name[:-1] if count == 1 else axis_name}",
                         need(row, "scf_energy_seconds"), need(row, "gradient_seconds"),
                         need(row, "whole_run_seconds")))
    speedup_guides(ax_speed, max_count, "no gain")
    ax_speed.set_xlabel(axis_name)
    ax_speed.set_ylabel(f"gradient speedup over 1 {axis_name[:-1]}")
    ax_speed.set_title("gradient speedup")
    ax_speed.legend()
    x = list(range(len(bars)))
    w = 0.27
    ax_cost.bar([v - w for v in x], [b[1] for b in bars], w, color="C2", label="one SCF energy")
    ax_cost.bar(x, [b[2] for b in bars], w, color="C0", label="gradient (after its SCF)")
    ax_cost.bar([v + w for v in x], [b[3] for b in bars], w, color="C4",
                label="whole run (SCF + gradient)")
    for v, bar in zip(x, bars):
        ax_cost.annotate(f"{bar[3] / bar[1]:.1f}x", (v + w, bar[3]), textcoords="offset points",
                         xytext=(0, 2), ha="center", fontsize=7)
    ax_cost.set_xticks(x, [b[0] for b in bars], fontsize=7)
    ax_cost.set_ylabel("wall time (s)")
    ax_cost.set_title("gradient cost in SCF energies (labels: whole run / SCF)")
    ax_cost.legend(fontsize=7)
    fig.suptitle("adjoint: RHF gradient with respect to basis exponents and coefficients "
                 "(adjoint_gradient)", fontsize=10)
    fig.tight_layout()
    footnote(fig, f"adjoint_gradient.json; best of {data.get('repeats', '?')} runs; no PySCF "
                  "gradient in the results to compare with.",
             machine(meta, data.get("load_average_1min")))
    return save(fig, out, "adjoint_gradient")


def adjoint_ranks(results: Results, out: Path) -> Path:
    """RHF, gradient and J/K builds on 1 against 2 simulated devices (adjoint_ranks.json)."""
    data = results["adjoint_ranks"]
    meta = need(data, "_meta")
    energy = need(data, "energy")
    gradient = need(data, "gradient")
    builds = need(data, "jk_build")
    fig, (ax_time, ax_ratio) = plt.subplots(1, 2, figsize=(10, 4))
    labels = ["RHF energy", "gradient", "J/K build (best)"]
    one = [need(energy, "one_device_seconds"), need(gradient, "one_device_seconds"),
           need(builds, "best_one_device_seconds")]
    two = [need(energy, "two_devices_seconds"), need(gradient, "two_devices_seconds"),
           need(builds, "best_two_devices_seconds")]
    x = list(range(len(labels)))
    w = 0.38
    ax_time.bar([v - w / 2 for v in x], one, w, color="C0", label="1 device (every core)")
    ax_time.bar([v + w / 2 for v in x], two, w, color="C1", label="2 devices (cores split)")
    log_axis(ax_time, "y")
    ax_time.set_xticks(x, labels)
    ax_time.set_ylabel("wall time (s)")
    ax_time.set_title("time")
    ax_time.legend()
    pairs = need(builds, "pairs_seconds")
    ratios = [b / a for a, b in pairs]
    ax_ratio.plot([0] * 1, [need(energy, "ratio")], "o", color="C2", label="whole RHF energy")
    ax_ratio.plot([1], [need(gradient, "ratio")], "o", color="C3", label="whole gradient")
    ax_ratio.plot([2] * len(ratios), ratios, "o", color="C0", alpha=0.6, fillstyle="none",
                  label=f"J/K build pairs ({len(ratios)})")
    ax_ratio.plot([2], [need(builds, "median_paired_ratio")], "D", color="C0",
                  label="J/K build, median of pairs")
    ax_ratio.axhline(1.0, **SHARED_STYLE, label="same time")
    ax_ratio.axhline(1.05, **IDEAL_STYLE, label="issue's bound: 5% over 1 device")
    ax_ratio.set_xticks(x, labels)
    ax_ratio.set_xlim(-0.5, 2.5)
    ax_ratio.set_ylabel("time on 2 devices / time on 1")
    ax_ratio.set_title("cost of the split")
    ax_ratio.legend(fontsize=6.5)
    fig.suptitle(f"adjoint: {need(data, 'case')} ({data.get('nao', '?')} AOs) split between "
                 "ranks (adjoint_ranks)", fontsize=10)
    fig.tight_layout()
    load = None
    if "load_average_1min_start" in data:
        load = f"{data['load_average_1min_start']} at the start, " \
               f"{data.get('load_average_1min_end', '?')} at the end"
    footnote(fig, "adjoint_ranks.json; " + simulated_note(meta)
             + f" Whole runs best of {data.get('repeats', '?')}.", machine(meta, load))
    return save(fig, out, "adjoint_ranks")


# ---------------------------------------------------------------------------------------
# fit


def fit_scaling(results: Results, out: Path) -> Path:
    """The data-parallel fit on 1, 2, 4 devices and the skewed workload (fit_scaling.json)."""
    data = results["fit_scaling"]
    meta = need(data, "_meta")
    rows = sorted(need(data, "scaling"), key=lambda row: need(row, "devices"))
    if not rows:
        raise Missing("no rows in ['scaling']")
    skewed = data.get("skewed_balance") or []
    panels = 3 if skewed else 2
    fig, axes = plt.subplots(1, panels, figsize=(4 * panels, 3.8))
    devices = [need(row, "devices") for row in rows]
    labels = [str(d) for d in devices]
    evaluation = [need(row, "rank0_evaluation_seconds") for row in rows]
    reduction = [need(row, "rank0_reduction_seconds") for row in rows]
    seconds = [need(row, "seconds") for row in rows]
    ax = axes[0]
    ax.bar(labels, evaluation, 0.5, color="C0", label="rank 0: evaluations")
    ax.bar(labels, reduction, 0.5, bottom=evaluation, color="C3", label="rank 0: reductions")
    ax.plot(labels, seconds, "kD", markersize=4, label="whole fit")
    ax.set_xlabel("simulated devices")
    ax.set_ylabel("wall time (s)")
    ax.set_title(f"fit time ({need(rows[0], 'evaluations')} evaluations)")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(devices, [seconds[0] / s for s in seconds], "o-", color="C0", label="measured")
    speedup_guides(ax, max(devices), "no gain: the same cores shared")
    ax.set_xlabel("simulated devices")
    ax.set_ylabel("speedup over 1 device")
    ax.set_title("fit speedup")
    ax.legend(fontsize=7)
    if skewed:
        ax = axes[2]
        names = ["balanced" if need(row, "balance") else "unbalanced" for row in skewed]
        x = list(range(len(skewed)))
        w = 0.38
        ax.bar([v - w / 2 for v in x], [need(row, "makespan_final") for row in skewed], w,
               color="C2", label="makespan (cost units)")
        ax.set_ylabel("estimated makespan (cost units)")
        twin = ax.twinx()
        twin.bar([v + w / 2 for v in x], [need(row, "seconds") for row in skewed], w,
                 color="C1", label="wall time (s)")
        twin.set_ylabel("wall time (s)")
        twin.grid(False)
        ax.set_xticks(x, names)
        ax.set_title("skewed costs on 2 devices")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
        twin.set_ylim(0, twin.get_ylim()[1] * 1.3)
        lines = ax.get_legend_handles_labels()
        twin_lines = twin.get_legend_handles_labels()
        ax.legend(lines[0] + twin_lines[0], lines[1] + twin_lines[1], fontsize=7,
                  loc="upper right")
    fig.suptitle("fit: least-squares fit split among simulated devices (fit_scaling)",
                 fontsize=10)
    fig.tight_layout()
    footnote(fig, "fit_scaling.json; the reaction-network example with 20x heavier "
                  "evaluations. " + simulated_note(meta), machine(meta))
    return save(fig, out, "fit_scaling")


# ---------------------------------------------------------------------------------------
# group and collectives


def group_scaling(results: Results, out: Path) -> Path:
    """A sum split among G simulated devices against one thread (group_scaling.json)."""
    data = results["group_scaling"]
    meta = need(data, "_meta")
    rows = sorted(need(data, "runs"), key=lambda row: need(row, "devices"))
    if not rows:
        raise Missing("no rows in ['runs']")
    devices = [need(row, "devices") for row in rows]
    speedup = [need(row, "speedup_vs_one_thread") for row in rows]
    cores = meta.get("cores")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot(devices, speedup, "o-", color="C0", label="measured (over one thread)")
    ax.plot([1, max(devices)], [1, max(devices)], label="speedup = devices (a core each)",
            **IDEAL_STYLE)
    if cores:
        ax.axhline(cores, label=f"ideal on this host: its {cores} cores", **SHARED_STYLE)
    ax.set_xticks(range(1, max(devices) + 1))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("simulated devices")
    ax.set_ylabel("speedup over one thread")
    terms = f"{need(data, 'terms'):,}".replace(",", " ")
    ax.set_title(f"group: a sum of {terms} terms split among devices")
    ax.legend(fontsize=7)
    footnote(fig, f"group_scaling.json; one thread: {need(data, 'serial_seconds'):.2f} s; "
                  "blocks by rank, then one allreduce.", simulated_note(meta), machine(meta))
    return save(fig, out, "group_scaling")


def collectives(results: Results, out: Path) -> Path:
    """Allreduce and allgather on G simulated devices beside the sequential operation
    (collectives.json)."""
    data = results["collectives"]
    meta = need(data, "_meta")
    rows = sorted(need(data, "runs"), key=lambda row: need(row, "devices"))
    if not rows:
        raise Missing("no rows in ['runs']")
    length = need(data, "len_per_rank")
    devices = [need(row, "devices") for row in rows]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    series = (
        ("allreduce_seconds", "allreduce (sum)", "C0", "o-", "full"),
        ("sequential_sum_seconds", "sequential sum, one thread", "C0", "o--", "none"),
        ("allgather_seconds", "allgather", "C1", "s-", "full"),
        ("concat_seconds", "sequential concatenation", "C1", "s--", "none"),
    )
    for key, label, color, style, fill in series:
        ax.plot(devices, [need(row, key) * 1e3 for row in rows], style, color=color,
                label=label, fillstyle=fill)
    log_axis(ax, "y")
    ax.set_xticks(devices)
    ax.set_xlabel("simulated devices G")
    ax.set_ylabel("wall time (ms)")
    ax.set_title(f"collectives: {length} f64 ({length * 8 / 2**20:.0f} MiB) per rank")
    ax.legend(fontsize=7)
    footnote(fig, "collectives.json; baseline: the same arithmetic done sequentially on one "
                  "thread, same process.", simulated_note(meta), machine(meta))
    return save(fig, out, "collectives")


def mpi_compare(results: Results, out: Path) -> Path:
    """The MPI transport beside raw MPI_Alltoall and threads; workloads on processes beside
    threads (mpi_compare.json)."""
    data = results["mpi_compare"]
    meta = need(data, "_meta")
    rows = sorted(need(data, "exchange"), key=lambda row: need(row, "kib_per_pair"))
    if not rows:
        raise Missing("no rows in ['exchange']")
    processes = need(data, "processes")
    fig, (ax_x, ax_w) = plt.subplots(1, 2, figsize=(10, 4))
    kib = [need(row, "kib_per_pair") for row in rows]
    for key, label, style in (
        ("transport_seconds", "tutti MPI transport", "o-"),
        ("raw_mpi_alltoall_seconds", "raw MPI_Alltoall", "s--"),
        ("threads_seconds", f"{processes} threads in one process", "^:"),
    ):
        ax_x.plot(kib, [need(row, key) * 1e6 for row in rows], style, label=label)
    ax_x.set_xscale("log", base=2)
    log_axis(ax_x, "y")
    ax_x.set_xticks(kib, [str(k) for k in kib])
    ax_x.set_xlabel("KiB per pair of ranks")
    ax_x.set_ylabel("time per exchange (µs)")
    ax_x.set_title(f"one all-to-all exchange, {processes} ranks")
    ax_x.legend(fontsize=7)
    workloads = [name for name in ("fit", "fmm") if name in data]
    x = list(range(len(workloads)))
    w = 0.38
    procs = [need(data, name, "processes_seconds") for name in workloads]
    threads = [need(data, name, "threads_seconds") for name in workloads]
    ax_w.bar([v - w / 2 for v in x], procs, w, color="C0", label=f"{processes} MPI processes")
    ax_w.bar([v + w / 2 for v in x], threads, w, color="C2", label=f"{processes} threads")
    for v, name in zip(x, workloads):
        if data[name].get("bitwise_equal"):
            ax_w.annotate("bitwise equal", (v, max(procs[v], threads[v])),
                          textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    names = [f"FMM, {data['fmm']['bodies']} bodies" if n == "fmm" and "bodies" in data["fmm"]
             else n for n in workloads]
    ax_w.set_xticks(x, names)
    ax_w.set_ylabel("wall time (s)")
    ax_w.set_ylim(top=max(procs + threads) * 1.2)
    ax_w.set_title("workloads: processes beside threads")
    ax_w.legend(fontsize=7)
    library = str(data.get("mpi_library", "")).split(",")[0].replace("\x00", "")
    fig.suptitle("MPI transport against raw MPI and threads (mpi_compare)", fontsize=10)
    fig.tight_layout()
    footnote(fig, f"mpi_compare.json; {library}, {data.get('launcher', '')}, thread level "
                  f"{data.get('thread_level', '?')}; {processes} processes on one node.",
             machine(meta))
    return save(fig, out, "mpi_compare")


FIGURES = (
    fmm_sizes,
    fmm_devices,
    fmm_vs_fmm3d,
    sweep_exact,
    sweep_devices,
    sweep_peers,
    adjoint_pyscf,
    adjoint_gradient,
    adjoint_ranks,
    fit_scaling,
    group_scaling,
    collectives,
    mpi_compare,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("benches/results"),
                        help="directory of the benches' JSON results")
    parser.add_argument("--out", type=Path, default=Path("docs/figures"),
                        help="directory the SVG figures go to")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = Results(args.results)
    made = skipped = 0
    for figure in FIGURES:
        results.last = ""
        try:
            path = figure(results, args.out)
        except (Missing, TypeError, ValueError, ZeroDivisionError) as err:
            # A field of the wrong type or an empty series is missing data too.
            why = err if isinstance(err, Missing) else (
                f"unusable data ({type(err).__name__}: {err})"
            )
            plt.close("all")
            stale = args.out / f"{figure.__name__}.svg"
            removed = ""
            # A figure without data goes; one whose file is malformed stays until it is fixed.
            if stale.exists() and not isinstance(err, Malformed):
                stale.unlink()
                removed = f" (removed the old {stale})"
            print(f"skip {figure.__name__}: {results.last}: {why}{removed}")
            skipped += 1
            continue
        size = path.stat().st_size
        print(f"wrote {path} ({size / 1024:.0f} KiB)")
        made += 1
    print(f"{made} figure(s) written, {skipped} skipped")
    if results.malformed:
        for line in results.malformed:
            print(f"error: malformed JSON: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
