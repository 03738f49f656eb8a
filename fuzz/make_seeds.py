#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target into fuzz/seeds/<target>/.

Valid inputs of each format (so the fuzzer starts from files that parse), plus the crafted
inputs of the hardening review (`shared/research/hardening.md`), which must stay refused.
Standard library only: the `.npy` headers are written by hand. Run from anywhere:
`python3 fuzz/make_seeds.py`. Files named `found_*` beside these are inputs the fuzzers
found (kept as regressions); this script leaves them alone.
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
SEEDS = HERE / "seeds"
ROOT = HERE.parent


def npy(shape, values, descr="<f8", fortran=False):
    """A version-1 .npy file with the given shape and raw float values."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False", dims)
    padded = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    body = b"".join(struct.pack("<d", v) for v in values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(padded)) + padded.encode() + body


def frame(files):
    """The framing of `tutti_fuzz::split_files`: a count byte, then length-prefixed files."""
    out = bytes([len(files) - 1])
    for data in files[:-1]:
        assert len(data) < 65536
        out += struct.pack("<H", len(data)) + data
    return out + files[-1]


def write(target, name, data):
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data.encode() if isinstance(data, str) else data)


def train_seeds():
    ramp = lambda n: [0.25 * (k + 1) for k in range(n)]
    write("npy_train_dir", "mps_1site", frame([npy((1, 2, 1), ramp(2))]))
    write("npy_train_dir", "mps_3site", frame([
        npy((1, 2, 2), ramp(4)), npy((2, 2, 2), ramp(8)), npy((2, 2, 1), ramp(4))]))
    write("npy_train_dir", "mpo_2site", frame([
        npy((1, 2, 2, 3), ramp(12)), npy((3, 2, 2, 1), ramp(12))]))
    write("npy_train_dir", "mps_complex", frame([
        npy((1, 2, 1), ramp(4), descr="<c16"), npy((1, 3, 1), ramp(6), descr="<c16")]))
    # H2: shape products that wrap to 1 modulo 2^64, one double each.
    write("npy_train_dir", "wrap_2site", frame([
        npy((1, 67280421310721, 274177), [1.0]), npy((274177, 67280421310721, 1), [1.0])]))
    write("npy_train_dir", "wrap_3", frame([npy((1, 3, 12297829382473034411), [1.0])]))
    write("npy_train_dir", "bond_mismatch", frame([
        npy((1, 2, 3), ramp(6)), npy((2, 2, 1), ramp(4))]))
    write("npy_train_dir", "truncated", frame([npy((1, 2, 1 << 40), [1.0])]))


def fmm_seeds():
    cube = [0.1 * k for k in range(12)]
    write("npy_fmm", "positions", npy((4, 3), cube))
    write("npy_fmm", "masses", npy((4,), [1.0, 2.0, 3.0, 4.0]))
    write("npy_fmm", "empty", npy((0, 3), []))
    write("npy_fmm", "huge_rows", npy((6148914691236517206, 3), [1.0, 2.0]))
    write("npy_fmm", "fortran", npy((2, 3), cube[:6], fortran=True))
    write("npy_fmm", "f4", npy((2,), [1.0], descr="<f4"))


def xyz_seeds():
    write("xyz", "water", "3\nwater\nO 0 0 0.1173\nH 0 0.7572 -0.4692\nH 0 -0.7572 -0.4692\n")
    write("xyz", "h2", "2\n\nH 0 0 0\nH 0 0 0.74\n")
    write("xyz", "huge_count", "100000000000\nx\nH 0 0 0\n")
    write("xyz", "max_count", "18446744073709551615\nx\nH 0 0 0\n")
    write("xyz", "nan", "1\n\nH nan 0 0\n")


def nwchem_seeds():
    library = (ROOT / "crates/tutti-adjoint/data/basis/sto-3g.nw").read_text().splitlines()
    header = [line for line in library if line.startswith("BASIS")][:1]
    keep, current = [], None
    for line in library:
        if line.startswith(("H ", "O ", "C ")) and line.split()[0] in ("H", "O", "C"):
            current = line.split()[0]
        elif line and not line[0].isspace():
            current = None
        if current and not line.startswith("#"):
            keep.append(line)
    write("nwchem", "sto3g_hco", "\n".join(header + keep + ["END", ""]))
    write("nwchem", "nan_row", "BASIS \"ao basis\" SPHERICAL\nH S\n nan 1.0\nEND\n")
    write("nwchem", "huge_exponent", "BASIS \"ao basis\" SPHERICAL\nH S\n 1e300 1.0\nEND\n")
    write("nwchem", "d_shell", "BASIS \"ao basis\" CARTESIAN\nH D\n 0.8 1.0\nH P\n 1.1 1.0\nEND\n")


def ledger_seeds():
    records = [
        {"task_id": "replicate-0", "input_hash": "fnv1a64:0123456789abcdef",
         "status": "accepted", "attempts": 1, "result": {"parameters": [1.0, 2.5]}},
        {"task_id": "replicate-1", "input_hash": "fnv1a64:fedcba9876543210",
         "status": "failed", "attempts": 2, "error": "did not converge"},
    ]
    ledger = {"format": "tutti-ledger", "version": 1, "tasks": records}
    write("ledger", "two_tasks", json.dumps(ledger, indent=1))
    wrapped = dict(ledger, tasks=[dict(records[1], attempts=4294967295)])
    write("ledger", "attempts_max", json.dumps(wrapped))
    write("ledger", "empty", json.dumps(dict(ledger, tasks=[])))
    write("ledger", "foreign", json.dumps({"format": "other", "version": 1, "tasks": []}))


def capi_seeds():
    # kind, dtype, n_sites, then per dimension a tag byte (< 224: small dims 1..4).
    mps_2site = bytes([0, 0, 2, 0, 1, 1, 1, 1, 0]) + bytes(range(64))
    mpo_1site = bytes([1, 0, 1, 0, 1, 1, 0]) + bytes(range(64))
    complex_mps = bytes([0, 1, 3, 0, 2, 1, 1, 2, 1, 1, 0, 0]) + bytes(range(96))
    # H5: n_sites 2, shapes {1,2,100000, 1,2,1} through raw i32 dims.
    h5 = bytes([0, 0, 2, 0, 1, 230]) + struct.pack("<i", 100000) + bytes([0, 1, 0])
    write("capi_train_arrays", "mps_2site", mps_2site)
    write("capi_train_arrays", "mpo_1site", mpo_1site)
    write("capi_train_arrays", "complex_mps", complex_mps)
    write("capi_train_arrays", "h5_bonds", h5 + bytes(64))
    write("capi_fmm", "bodies_16", bytes([16, 0, 0, 1]) + bytes((k * 37) % 256 for k in range(160)))
    write("capi_fmm", "bodies_64_leaf1", bytes([64, 0, 0, 3]) + bytes((k * 91) % 256 for k in range(640)))
    for case in range(1, 5):
        write("capi_fmm", f"aliased_{case}", bytes([8, case, 2, 0]) + bytes(range(80)))


if __name__ == "__main__":
    train_seeds()
    fmm_seeds()
    xyz_seeds()
    nwchem_seeds()
    ledger_seeds()
    capi_seeds()
    print(f"seeds written under {SEEDS}")
