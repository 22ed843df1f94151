"""Select oslo.service's threading backend (numamig never uses eventlet).

oslo.service 4.x still defaults to eventlet; the backend must be chosen
before oslo.messaging builds a server. The package import does it
tolerantly (a tool such as oslo-config-generator may already have picked
a backend); daemons call it strictly from ``main()``.
"""

from oslo_service import backend


def select_threading(strict=True):
    """Make the threading backend oslo.service's backend.

    :param strict: raise if another backend is already in use.
    """
    try:
        backend.init_backend(backend.BackendType.THREADING)
    except Exception:
        if backend.get_backend_type() == backend.BackendType.THREADING:
            return
        if strict:
            raise
