"""numamig: NUMA-aware live migration for libvirt/KVM clouds."""

import warnings

# futurist imports eventlet, which warns on import that it is deprecated;
# numamig never uses eventlet, so the warning only confuses operators.
warnings.filterwarnings('ignore', message=r'(?s)\s*Eventlet is deprecated')

from numamig import _backend  # noqa: E402

_backend.select_threading(strict=False)
