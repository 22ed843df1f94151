"""Checks of RPC arguments, declared per endpoint, before any work.

Why: any client of the broker can call any method of the conductor or an
agent with anything JSON can carry. oslo.messaging hands the endpoint
whatever arrived; a dict where an object belongs, a number where a name
belongs or an argument too many used to fail deep inside with
AttributeError or TypeError (a crash in the logs, a bare "unexpected
error" for the caller), or worse, to be used. Each endpoint now declares
what each argument must be (``@wire.args(...)``) and a message that does
not fit is refused with InvalidRPCArgument naming the method and the
argument, before the endpoint runs. A unit test keeps every endpoint
declared.
"""

import functools
import inspect
import re

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig.objects import base as obj_base

LOG = logging.getLogger(__name__)

_UUID = re.compile(r'^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                   r'[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$')
# Longest text any argument may carry (a reason, a detail).
MAX_TEXT = 4096
# Most items a list or dict argument may carry.
MAX_ITEMS = 10000


class Kind:
    """What one argument must be; ``problem(value)`` says why not."""

    def __init__(self, what, test, nullable=False):
        self.what = what
        self._test = test
        self.nullable = nullable

    def problem(self, value):
        if value is None:
            return None if self.nullable else f"must be {self.what}, " \
                                              f"not null"
        try:
            fits = self._test(value)
        except (TypeError, ValueError):
            fits = False
        return None if fits else f"must be {self.what}, got " \
                                 f"{_shown(value)}"

    def or_none(self):
        return Kind(f"{self.what} or null", self._test, nullable=True)


def text(max_length=255, what=None):
    return Kind(what or f"a string of at most {max_length} characters",
                lambda v: isinstance(v, str) and len(v) <= max_length)


def integer(low=0, high=2 ** 63 - 1):
    return Kind(f"an integer from {low} to {high}",
                lambda v: isinstance(v, int) and not isinstance(v, bool)
                and low <= v <= high)


def number(low=0, high=10 ** 6):
    return Kind(f"a number from {low} to {high}",
                lambda v: isinstance(v, (int, float)) and
                not isinstance(v, bool) and low <= v <= high)


def one_of(values):
    allowed = frozenset(values)
    return Kind(f"one of {', '.join(sorted(allowed))}",
                lambda v: isinstance(v, str) and v in allowed)


def obj(name):
    """A versioned object of class ``name`` (deserialized as such)."""
    return Kind(f"a {name} object",
                lambda v: isinstance(v, obj_base.NumamigObject) and
                v.obj_name() == name)


def mapping(max_items=MAX_ITEMS):
    return Kind(f"a mapping of at most {max_items} items",
                lambda v: isinstance(v, dict) and len(v) <= max_items)


def host_list(max_items=MAX_ITEMS):
    """A list of host names."""
    return Kind(f"a list of at most {max_items} host names",
                lambda v: isinstance(v, list) and len(v) <= max_items and
                all(HOST.problem(item) is None for item in v))


def uuid_list(max_items=MAX_ITEMS):
    """A list of UUIDs."""
    return Kind(f"a list of at most {max_items} UUIDs",
                lambda v: isinstance(v, list) and len(v) <= max_items and
                all(UUID.problem(item) is None for item in v))


UUID = Kind("a UUID", lambda v: isinstance(v, str) and bool(_UUID.match(v)))
HOST = text(255, "a host name (a string of at most 255 characters)")
TEXT = text(MAX_TEXT)
BOOL = Kind("true or false", lambda v: isinstance(v, bool))


def args(**kinds):
    """Declare an endpoint's arguments; refuse messages that do not fit.

    Every parameter of the endpoint after the context must be declared.
    The method is marked exposed: servers of a class that sets
    ``wire_declared`` dispatch to declared methods only
    (numamig.rpc.DeclaredOnlyPolicy), so that no helper of a manager is
    callable from the broker.
    """
    def decorate(func):
        method = _endpoint(func).__name__
        params = list(inspect.signature(_endpoint(func)).parameters.values(
        ))[2:]
        names = [p.name for p in params]
        if set(names) != set(kinds):
            raise TypeError(f"{method}: declared {sorted(kinds)}, "
                            f"takes {sorted(names)}")
        required = {p.name for p in params
                    if p.default is inspect.Parameter.empty}

        @functools.wraps(_endpoint(func))
        def checked(self, ctxt, *positional, **kwargs):
            # Callers in this process may pass arguments by position;
            # RPC messages always name them.
            if len(positional) > len(names):
                raise TypeError(f"{method} takes {len(names)} "
                                f"arguments after the context")
            kwargs.update(zip(names, positional, strict=False))
            try:
                _check(method, kinds, required, kwargs)
            except exception.InvalidRPCArgument:
                # A refusal, not a crash: the server answers it without
                # logging a trace (as expected_exceptions does).
                raise messaging.ExpectedException()
            try:
                return func(self, ctxt, **kwargs)
            except exception.DatabaseError as exc:
                # An outage, not a bug: one line per request, not a
                # traceback each; the caller gets the DatabaseError
                # (numamig's, so it crosses the wire) and may retry.
                LOG.warning("%s not served: %s", method,
                            ' '.join(exception.brief(exc).split()))
                raise messaging.ExpectedException()
        checked.wire_args = kinds
        checked.exposed = True
        return checked
    return decorate


def _endpoint(func):
    """The method under oslo.messaging's expected_exceptions, which does
    not functools.wrap it (its signature is what is declared)."""
    if func.__name__ == 'inner' and func.__closure__:
        inner = [c.cell_contents for c in func.__closure__
                 if inspect.isfunction(c.cell_contents)]
        if len(inner) == 1:
            return inner[0]
    return func


def _check(method, kinds, required, kwargs):
    for name in sorted(set(kwargs) - set(kinds)):
        raise exception.InvalidRPCArgument(
            method=method, argument=name, reason="not an argument of it")
    for name in sorted(required - set(kwargs)):
        raise exception.InvalidRPCArgument(
            method=method, argument=name, reason="missing")
    for name, value in kwargs.items():
        problem = kinds[name].problem(value)
        if problem:
            raise exception.InvalidRPCArgument(method=method, argument=name,
                                               reason=problem)


def _shown(value):
    shown = repr(value)
    kind = type(value).__name__
    return f"{kind} {shown[:60]}{'...' if len(shown) > 60 else ''}"
