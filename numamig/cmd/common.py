"""Shared machinery of numamig's category/action console scripts.

A command-line tool is a dict of categories (nouns) to classes; every
public method of a class is an action (a verb). Arguments are declared
with ``@args`` in argparse terms and land on the action as keyword
arguments. Exit codes are the same across the CLI (see EXIT_*).
"""

import argparse
import functools
import gc
import importlib
import inspect
import json
import re
import sys

# One exit code scheme for every numamig-manage action.
EXIT_OK = 0            # done; nothing found (audits); fits (numa fit)
EXIT_NO = 1            # the answer is no (does not fit, migration failed)
EXIT_PROBLEMS = 3      # an audit found problems
EXIT_HEALED = 4        # problems were found and healed
EXIT_INTERRUPTED = 130 # Ctrl-C: what was started goes on (the line says)
EXIT_BAD_INPUT = 127   # the input was wrong; nothing was changed
EXIT_UNEXPECTED = 255  # a bug or an unreachable service

ACTION_PREFIX = 'action_kwarg_'


def leave_objects_to_exit():
    """Spare the ending process the final garbage collection.

    At exit Python walks every object the imports made (oslo.config,
    oslo.messaging, the versioned objects...) to collect cycles, ~0.1 s of
    a short command measured here; frozen objects are skipped and the
    operating system takes the memory back. Only for a console script's
    own process, right before it ends: never in a process that goes on
    (tests call main() with argv).
    """
    gc.freeze()


class lazy:  # noqa: N801 - stands for a module or class, named as one
    """A module, or one of its attributes, imported on first use.

    A category module names what its actions use (``STATUS =
    lazy('numamig.objects.fields', 'MigrationStatus')``) without
    importing it: importing anything under ``numamig.objects`` loads the
    object registry and, through oslo.versionedobjects, oslo.messaging,
    which ``--help`` and the actions that build no object do not need.
    A test (tests/unit/cmd/test_imports.py) keeps each command's module
    free of the heavy libraries its actions do not all use.
    """

    def __init__(self, module, attribute=None):
        self._where = (module, attribute)
        self._target = None

    def _resolve(self):
        if self._target is None:
            module, attribute = self._where
            target = importlib.import_module(module)
            self._target = target if attribute is None else getattr(
                target, attribute)
        return self._target

    def __getattr__(self, name):
        if name.startswith('_'):
            raise AttributeError(name)
        return getattr(self._resolve(), name)


def args(*names, **kwargs):
    """Declare an argparse argument of an action (stack several)."""
    def decorator(func):
        func.__dict__.setdefault('cli_args', []).insert(0, (names, kwargs))
        return func
    return decorator


def format_option(func):
    """Add the ``--format human|json`` option every action offers."""
    return args('--format', dest='output_format', default='human',
                choices=['human', 'json'],
                help="Output for people (default) or JSON for scripts.")(
                    func)


def actions_of(category_class):
    """Return {action name: function} of a category's public methods."""
    return {name.replace('_', '-'): func for name, func in
            inspect.getmembers(category_class, inspect.isfunction)
            if not name.startswith('_')}


def summary(doc):
    """A docstring's first paragraph on one line (its --help summary).

    The first sentence of a docstring may wrap over several lines: its
    first line alone reads cut off in ``--help``.
    """
    if not doc:
        return None
    lines = []
    for line in doc.strip().splitlines():
        if not line.strip():
            break
        lines.append(line.strip())
    return ' '.join(lines)


def add_command_parsers(categories):
    """Return a SubCommandOpt handler registering every category/action.

    :param categories: {name: class}; a name may map to a one-line
        summary instead, for a category the command line does not use
        (listed in --help, its class left unimported).
    """
    def handler(subparsers):
        for category, cls in categories.items():
            if isinstance(cls, str):
                subparsers.add_parser(category, help=cls)
                continue
            parser = subparsers.add_parser(
                category, help=summary(inspect.getdoc(cls)))
            parser.set_defaults(category_class=cls)
            action_parsers = parser.add_subparsers(dest='action')
            action_parsers.required = True
            for action, func in sorted(actions_of(cls).items()):
                _add_action_parser(action_parsers, action, func)
    return handler


def _add_action_parser(action_parsers, action, func):
    doc = inspect.getdoc(func) or ''
    parser = action_parsers.add_parser(
        action, help=summary(doc),
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    dests = []
    for names, kwargs in getattr(func, 'cli_args', []):
        kwargs = dict(kwargs)
        if 'dest' in kwargs:
            dest = kwargs['dest']
        elif names[0].startswith('-'):
            dest = names[0].lstrip('-').replace('-', '_')
        else:
            dest = names[0]
        dests.append(dest)
        # The prefix keeps an action's 'host' from colliding with the
        # [DEFAULT] host option in oslo.config's namespace.
        if names[0].startswith('-'):
            kwargs['dest'] = ACTION_PREFIX + dest
        else:
            kwargs.pop('dest', None)
            kwargs.setdefault('metavar', names[0].upper())
            names = (ACTION_PREFIX + dest,)
        parser.add_argument(*names, **kwargs)
    parser.set_defaults(action_fn=func, action_kwargs=dests)


def action_kwargs(category_opt):
    """Collect the parsed action arguments of a SubCommandOpt's value."""
    return {name: getattr(category_opt, ACTION_PREFIX + name)
            for name in category_opt.action_kwargs}


def plain(value):
    """A versioned object (and what it holds) as plain JSON data.

    Operators' scripts read fields, not oslo.versionedobjects' wire
    format (``numamig_object.data``, ``.version``, ``.changes``): an
    object becomes a dict of its set fields, a set a sorted list, a dict
    key a string, anything else JSON cannot hold its text.
    """
    if hasattr(value, 'obj_fields'):
        return {name: plain(getattr(value, name))
                for name in sorted(value.fields)
                if value.obj_attr_is_set(name)}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(plain(item) for item in value)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def print_output(data, output_format, human):
    """Print ``data`` as JSON, or through ``human(data)`` for people."""
    if output_format == 'json':
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        human(data)


def guarded(func):
    """Map an action's exceptions onto exit codes, printing why.

    The one error handling of every action. Bad input (unknown host,
    instance or migration, a refused request): 127, nothing changed. A
    "no" from the services (host down, no valid host): 1. The database or
    conductor unreachable: 255. Anything else is a bug and propagates to
    ``numamig-manage``'s last resort.
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from numamig import exception
        output_format = kwargs.get('output_format')
        try:
            return func(*args, **kwargs)
        except (exception.Invalid, exception.NotFound, ValueError) as exc:
            return fail(exc, EXIT_BAD_INPUT, output_format)
        except exception.MigrationError as exc:
            return fail(exc, EXIT_NO, output_format)
        except (exception.DatabaseError, exception.BrokerUnreachable,
                exception.ConductorUnreachable) as exc:
            return fail(exc, EXIT_UNEXPECTED, output_format)
        except Exception as exc:
            problem = _rpc_problem(exc)
            if problem is None:
                raise
            return fail(problem, EXIT_UNEXPECTED, output_format)
    return wrapper


# A call the conductor did not answer, through numamig.rpc or
# numamig.conductor.direct_rpc: it answered the command's ping, so it is
# there, busy or stuck.
_UNANSWERED = ("the conductor answered the ping but not the request "
               "within its timeout; the request may still be carried "
               "out: see the conductor's log, and list or show what it "
               "was about before asking again")


def _rpc_problem(exc):
    """What to tell the operator of an RPC failure; None if not one.

    An action that never imported oslo_messaging cannot have raised one
    of its exceptions, so it is looked up, not imported.
    """
    direct = sys.modules.get('numamig.conductor.direct_rpc')
    if direct is not None and isinstance(exc, direct.CallTimeout):
        return _UNANSWERED
    messaging = sys.modules.get('oslo_messaging')
    if messaging is None:
        return None
    if isinstance(exc, messaging.MessagingTimeout):
        return _UNANSWERED
    if isinstance(exc, messaging.MessagingException):
        from numamig import exception
        return f"RPC to the conductor failed: {exception.brief(exc)}"
    return None


def describe(exc):
    """One line for an operator about ``exc``, whatever raised it: a
    numamig error's message (a peer's without its traceback), what an
    RPC failure means, else the error's type and message."""
    from numamig import exception
    if isinstance(exc, exception.NumamigException):
        return exception.brief(exc)
    problem = _rpc_problem(exc)
    if problem is not None:
        return problem
    return f"{type(exc).__name__}: {exception.brief(exc)}"


def fail(problem, code, output_format=None):
    """Say what went wrong and return ``code``.

    Always one line ``error: problem`` on stderr; with ``--format json``
    also ``{"error": ..., "exit_code": ...}`` on stdout, so that a
    script reading stdout gets JSON whatever happened.
    """
    from numamig import exception
    if isinstance(problem, BaseException):
        problem = _config_value(problem) or exception.brief(problem)
    print(f"error: {problem}", file=sys.stderr)
    if output_format == 'json':
        print(json.dumps({'error': str(problem), 'exit_code': code},
                         sort_keys=True))
    return code


# oslo.config's text for a value it cannot read: the option, a repr of
# where it was set, and why.
_CONFIG_VALUE = re.compile(
    r"^Value for option (?P<option>\S+) from LocationInfo\(.*?"
    r"detail='(?P<where>[^']*)'\) is not valid: (?P<why>.*)$", re.S)


def _config_value(problem):
    """An option's unreadable value as one line naming the option, the
    file that set it and why (oslo.config's own text carries a
    LocationInfo repr), or None for any other error."""
    found = _CONFIG_VALUE.match(str(problem))
    if found is None:
        return None
    where = found['where']
    return (f"invalid value of option {found['option']}"
            + (f" in {where}" if where else '') + f": {found['why']}")


def wants_json(argv):
    """Whether a command line asked for ``--format json`` (for errors
    found before its arguments are parsed)."""
    argv = list(argv)
    return '--format=json' in argv or any(
        arg == '--format' and following == 'json'
        for arg, following in zip(argv, argv[1:], strict=False))
