"""numamig: NUMA-aware live migration for libvirt/KVM clouds."""

from numamig import _backend

_backend.select_threading(strict=False)
