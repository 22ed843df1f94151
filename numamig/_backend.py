"""Choose oslo.service's backend in the processes that run services.

oslo.service 4.x still defaults to eventlet, and merely importing
oslo_messaging (its server module imports oslo_service.service) makes
that default stick. numamig never uses eventlet, so every process that
builds an RPC server must pick the threading backend BEFORE anything
imports oslo_messaging: the daemons' ``main()`` do it strictly, first.

Importing the ``numamig`` package chooses nothing: a command that needs
no RPC (``numamig-manage --help``, the audits) must not pay for
oslo.service, futurist, eventlet and dnspython (~0.3 s a call). The
command-line tools call ``for_command_line``: nothing is loaded then, but
whatever later imports oslo_messaging (numamig.objects does, through
oslo.versionedobjects) gets the threading backend, without eventlet.
"""

import sys


def select_threading(strict=True):
    """Make the threading backend oslo.service's backend.

    :param strict: raise if another backend is already in use (a daemon
        whose start-up imported oslo_messaging too early); tolerant
        callers (tools run inside another program) accept it.
    """
    from oslo_service import backend
    try:
        backend.init_backend(backend.BackendType.THREADING)
    except Exception:
        if backend.get_backend_type() == backend.BackendType.THREADING:
            return
        if strict:
            raise


def hide_eventlet():
    """Make ``import eventlet`` fail in this process, unless done already.

    futurist, oslo.utils, oslo.concurrency and oslo.messaging import
    eventlet only to find out whether it monkey-patched the process;
    when it is absent they take their plain-threading paths. Loading it
    (and dnspython through it) costs a short-lived CLI call ~0.25 s.
    Once eventlet is loaded this changes nothing.
    """
    sys.modules.setdefault('eventlet', None)


def for_daemon():
    """Prepare a daemon's process: no eventlet, the threading backend.

    A daemon never uses eventlet either, and loading it (futurist looks
    for it as oslo.service's threading loop is imported) was ~7% of a
    daemon's imports, paid at every restart. Call first in ``main()``.
    """
    hide_eventlet()
    select_threading(strict=True)


def for_command_line():
    """Prepare a short-lived command-line process, loading nothing yet.

    Hides eventlet and makes threading the backend oslo.service loads
    when something first needs one (an explicit choice still wins).
    Call first in the tool's ``main()``.
    """
    from oslo_service import backend
    hide_eventlet()
    backend.register_backend_default_hook(
        lambda: backend.BackendType.THREADING)
