"""quimb's 1-D tensor networks as tutti trains and back (quimb is optional, never imported
unless the caller already uses it).

quimb labels a tensor's legs by name, not by position, so the conversion goes by names: for
site ``i`` of a ``MatrixProductState`` the left bond (the index shared with site ``i - 1``),
``site_ind(i)`` and the right bond (shared with site ``i + 1``), in that order, are tutti's
``(Dl, d, Dr)``, with size-1 bonds added at the ends. A ``MatrixProductOperator``'s
``upper_ind(i)`` (``'k{}'`` by default) is the output leg and ``lower_ind(i)`` (``'b{}'``) the
input: ``mpo.apply(mps)`` contracts the MPO's lower indices with the state's site indices and
gives the result the upper ones (``tensor_network_apply_op_vec`` in quimb 1.16's
``tensor/tnag/core.py``), and ``mpo.to_dense()`` puts the upper indices on the rows. So tutti's
core is ``(left bond, upper, lower, right bond)`` = ``(Dl, d_out, d_in, Dr)``, and
``tutti.src([mpo, mps], chi)`` approximates ``mpo.apply(mps)``.
"""

from __future__ import annotations

import sys

from ._lib import Status, TuttiError


def quimb_cores(train):
    """tutti's cores (numpy arrays, site 0 first) of a quimb ``MatrixProductState`` or
    ``MatrixProductOperator``, or ``None`` when ``train`` is not a quimb tensor network.

    Raises ``InvalidArgumentError`` for any other quimb tensor network, and for an MPS or MPO
    that is not an open chain with one tensor per site (cyclic, acting on some sites only,
    two tensors on a site, a dangling or repeated bond).
    """
    # A quimb object exists only once its module is loaded: never import quimb here.
    qtn = sys.modules.get("quimb.tensor")
    if qtn is None or not isinstance(train, qtn.TensorNetwork):
        return None
    name = type(train).__name__
    if isinstance(train, qtn.MatrixProductOperator):
        length = train.L
        legs = [(train.upper_ind(site), train.lower_ind(site)) for site in range(length)]
    elif isinstance(train, qtn.MatrixProductState):
        length = train.L
        legs = [(train.site_ind(site),) for site in range(length)]
    else:
        raise _invalid(
            f"a quimb {name} is not a train: tutti takes a MatrixProductState or a "
            "MatrixProductOperator"
        )
    if getattr(train, "cyclic", False):
        raise _invalid(
            f"the quimb {name} is cyclic (periodic boundary); tutti's trains are open chains"
        )
    site_of_tensor = {}
    for site in range(length):
        tag = train.site_tag(site)
        tids = train.tag_map.get(tag, ())
        if len(tids) != 1:
            raise _invalid(
                f"site {site} of the quimb {name} (tag {tag!r}) has {len(tids)} tensors: "
                "tutti needs exactly one on every site of the chain (contract each site "
                "first, e.g. apply(..., contract=True))"
            )
        site_of_tensor[next(iter(tids))] = site
    if train.num_tensors != length or len(site_of_tensor) != length:
        raise _invalid(
            f"the quimb {name} has {train.num_tensors} tensors on {length} sites: tutti needs "
            "one tensor per site"
        )

    import numpy as np
    from autoray import to_numpy  # a quimb dependency: any backend's array to numpy

    cores = []
    for tid, site in sorted(site_of_tensor.items(), key=lambda item: item[1]):
        tensor = train.tensor_map[tid]
        missing = [leg for leg in legs[site] if leg not in tensor.inds]
        if missing:
            raise _invalid(f"site {site} of the quimb {name} has no index {missing[0]!r}")
        # The bond indices to each neighbour, found by which tensor shares them.
        bonds = {site - 1: [], site + 1: []}
        for index in tensor.inds:
            if index in legs[site]:
                continue
            sharers = [site_of_tensor[t] for t in train.ind_map[index] if t != tid]
            if len(sharers) != 1 or sharers[0] not in bonds:
                raise _invalid(
                    f"site {site} of the quimb {name} has index {index!r}, neither a physical "
                    f"leg nor the bond to site {site - 1} or {site + 1}: tutti needs an open "
                    "chain"
                )
            bonds[sharers[0]].append(index)
        left, right = bonds[site - 1], bonds[site + 1]
        if len(left) != (site > 0) or len(right) != (site < length - 1):
            raise _invalid(
                f"site {site} of the quimb {name} has {len(left)} bond(s) to site {site - 1} "
                f"and {len(right)} to site {site + 1}: tutti needs exactly one between "
                "neighbours (fuse multibonds first, e.g. fuse_multibonds_())"
            )
        # (left bond, physical legs, right bond), with size-1 bonds where a chain ends.
        data = np.asarray(to_numpy(tensor.transpose(*left, *legs[site], *right).data))
        outer_left, outer_right = (1,) * (site == 0), (1,) * (site == length - 1)
        cores.append(data.reshape(outer_left + data.shape + outer_right))
    return cores


def to_quimb(cores, operator: bool):
    """A quimb ``MatrixProductState`` (``operator`` false; cores ``(Dl, d, Dr)``) or
    ``MatrixProductOperator`` (cores ``(Dl, d_out, d_in, Dr)``) with quimb's default names:
    site indices ``'k{}'``; for an operator upper (output) ``'k{}'`` and lower (input)
    ``'b{}'``; site tags ``'I{}'``. The arrays are the cores' own, end bonds dropped."""
    try:
        import quimb.tensor as qtn
    except ImportError as error:
        raise ModuleNotFoundError(
            "Train.to_quimb needs quimb (pip install quimb)", name="quimb"
        ) from error

    last = len(cores) - 1
    # quimb drops the end tensors' outer bonds; `shape` names the layout of the given arrays.
    arrays = [core[0] if site == 0 else core for site, core in enumerate(cores)]
    arrays = [array[..., 0] if site == last else array for site, array in enumerate(arrays)]
    if operator:
        return qtn.MatrixProductOperator(arrays, shape="ludr")
    return qtn.MatrixProductState(arrays, shape="lpr")


def _invalid(message: str) -> TuttiError:
    return TuttiError(Status.ERROR_INVALID_ARGUMENT, f"Train: {message}")
