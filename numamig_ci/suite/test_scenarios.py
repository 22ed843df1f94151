"""numamig-ci's scenarios for stestr (or any unittest runner).

    NUMAMIG_CI_ARGS='--embedded' stestr --top-dir TOP \
        --test-path TOP/numamig_ci/suite run --concurrency 1

where TOP is the directory holding the numamig_ci package
(``numamig-ci --suite-top`` prints it). ``NUMAMIG_CI_ARGS`` takes
numamig-ci's backend options (``--embedded``, ``--local-libvirt N``,
``--deployment FILE``, ``--transport-url`` ...) and ``--scenario``
filters; the default is ``--embedded``. The backend starts before the
first case and stops after the last, in the process running them, so
run with one worker: each worker would start a deployment of its own.
"""

import os
import shlex
import unittest

from numamig import _backend

# The backend's services run in this process: choose their oslo.service
# backend before anything imports oslo_messaging (numamig._backend).
_backend.select_threading(strict=False)

from numamig_ci import cases  # noqa: E402

ARGS_ENV = 'NUMAMIG_CI_ARGS'


class BackendSuite(unittest.TestSuite):
    """Starts the backend before its cases run and stops it after."""

    def __init__(self, backend, tests=()):
        super().__init__(tests)
        self.backend = backend

    def run(self, result, debug=False):
        if not self.countTestCases():
            return result
        with self.backend:
            return super().run(result, debug)


def load_tests(loader, standard_tests, pattern):
    from numamig_ci import cmd
    from numamig_ci.scenarios import registry
    args = cmd.build_parser().parse_args(
        shlex.split(os.environ.get(ARGS_ENV, '--embedded')))
    backend = cmd.make_backend(args)
    return BackendSuite(backend, list(cases.suite(
        backend, registry.select(args.scenario))))
