"""Guest-set fingerprints in the public podfingerprint v001 format.

A compute agent reports a fingerprint of the guests it runs or holds
claims for; the scheduler computes the fingerprint of the guest set it
expects on that host. Equal fingerprints mean the host's own accounting
already includes every placement the scheduler reserved, so the
reservations can be dropped (see host_state). The format is the one the
Kubernetes NUMA-aware scheduler ecosystem uses (k8stopologyawareschedwg
podfingerprint, version 1), so its tools can read numamig's reports: a
guest's (project id, instance uuid) stands for a pod's (namespace, name).

Algorithm, version 1: per guest ``h = xxh64(name, seed=xxh64(namespace))``;
the ``h`` values are sorted as unsigned 64-bit integers and each is fed as
8 little-endian bytes into one xxh64 with seed 0; the result is ``"pfp0"``
+ ``"v001"`` + the digest as 16 lowercase hex digits.
"""

import struct

import xxhash

PREFIX = 'pfp0'
VERSION = 'v001'
_HEADER = PREFIX + VERSION
_HEX_DIGITS = 16
_UINT64 = struct.Struct('<Q')


def guest_hash(namespace, name):
    """Return the 64-bit hash of one guest, as an int.

    :param namespace: the guest's project id (a pod's namespace).
    :param name: the guest's instance uuid (a pod's name).
    :raises TypeError: if either is not a string; str() of an arbitrary
        object would give a silently different fingerprint from the one
        the other side computes.
    """
    for what, value in (('namespace', namespace), ('name', name)):
        if not isinstance(value, str):
            raise TypeError(
                f"guest {what} must be a string, got {type(value).__name__} "
                f"{value!r}")
    seed = xxhash.xxh64_intdigest(namespace.encode('utf-8'))
    return xxhash.xxh64_intdigest(name.encode('utf-8'), seed=seed)


class Fingerprint:
    """Accumulates guests one at a time; ``sign()`` gives the string.

    A guest added twice counts once: the fingerprint describes a guest
    SET, and a host that lists a guest both as running and as claimed
    (or a caller that merges two overlapping lists) must still agree with
    a peer that lists it once.
    """

    def __init__(self, pairs=()):
        self._hashes = set()
        self.update(pairs)

    def add(self, namespace, name):
        """Add one guest identified by (project id, instance uuid)."""
        self._hashes.add(guest_hash(namespace, name))

    def update(self, pairs):
        """Add every (project id, instance uuid) pair of an iterable."""
        for namespace, name in pairs:
            self.add(namespace, name)

    def __len__(self):
        return len(self._hashes)

    def sign(self):
        """Return the fingerprint string of the guests added so far."""
        digest = xxhash.xxh64(seed=0)
        for value in sorted(self._hashes):
            digest.update(_UINT64.pack(value))
        return _HEADER + digest.hexdigest()


def compute(pairs):
    """Return the podfingerprint v001 string of a guest set.

    :param pairs: iterable of (project id, instance uuid) string pairs.
    :returns: e.g. ``'pfp0v001ef46db3751d8e999'`` for the empty set.
    :raises TypeError: if a pair holds something other than strings.
    """
    return Fingerprint(pairs).sign()


def is_valid(value):
    """Tell whether ``value`` is a well-formed v001 fingerprint string."""
    if not isinstance(value, str) or len(value) != len(_HEADER) + \
            _HEX_DIGITS or not value.startswith(_HEADER):
        return False
    return all(c in '0123456789abcdef' for c in value[len(_HEADER):])
