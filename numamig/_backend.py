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

import contextlib
import importlib.util
import sys

# Modules a command line loads when first used instead of when first
# imported. oslo_utils.strutils compiles some 300 regular expressions
# (its password masking) as it is imported: 40-60 ms, more than any other
# module of ``numamig-manage migration start`` and ~1.5x a bare
# interpreter's start-up (issue 43). oslo.versionedobjects' fields import
# it for two functions (masking a SensitiveString, parsing a
# FlexibleBoolean) that a command sending a request and printing the
# answer never calls; where one does, it is loaded then, unchanged.
DEFERRED = ('oslo_utils.strutils',)


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


def defer(name):
    """Load module ``name`` when an attribute of it is first used.

    A ``from package import module`` then binds the module without
    running it (the package's attribute is set, so the import system
    does not look the module up again); a plain ``import module`` loads
    it at once, as does everything a module-level ``from module import
    name`` reads. Nothing changes once the module is loaded already.
    Python 3.11's LazyLoader is not safe against two threads touching a
    deferred module first at the same moment: only modules a command's
    main thread uses are deferred.
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition('.')
    if parent:
        setattr(sys.modules[parent], child, module)


@contextlib.contextmanager
def without_yaml():
    """Import within this block as if PyYAML were not installed.

    kombu imports PyYAML as it is loaded, only to offer a YAML message
    serializer that oslo.messaging never uses (it sends JSON); loading
    it costs a command that sends ~10 ms. Imported in this block, kombu
    registers that serializer as unavailable. Nothing changes where
    PyYAML is loaded already, and after the block it imports as usual.
    """
    hidden = 'yaml' not in sys.modules
    if hidden:
        sys.modules['yaml'] = None
    try:
        yield
    finally:
        if hidden and sys.modules.get('yaml', 0) is None:
            del sys.modules['yaml']


def for_command_line():
    """Prepare a short-lived command-line process, loading nothing yet.

    Hides eventlet, defers DEFERRED, and makes threading the backend
    oslo.service loads when something first needs one (an explicit
    choice still wins). Call first in the tool's ``main()``.
    """
    from oslo_service import backend
    hide_eventlet()
    for name in DEFERRED:
        defer(name)
    backend.register_backend_default_hook(
        lambda: backend.BackendType.THREADING)
