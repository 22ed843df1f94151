"""Errors a peer raised, logged as their message only.

oslo.messaging rebuilds an error raised on the other side of a call with
that side's whole traceback in its ``str`` (numamig.exception.brief). A
log line that names such an error (``LOG.info("... did not start: %s",
exc)``) then spreads the peer's traceback over a dozen lines of the
daemon's log, for refusals that are expected and already explained.
This filter, on the daemons' log handlers, puts each such error's
message alone in the record; ``LOG.exception`` keeps the local
traceback (exc_info), which is where a traceback is wanted.
"""

import logging as stdlib_logging

from numamig import exception


class BriefRemoteErrors(stdlib_logging.Filter):
    """Replace a peer's error in a record's arguments by its message."""

    def filter(self, record):
        args = record.args
        if isinstance(args, tuple) and any(map(_remote, args)):
            record.args = tuple(exception.brief(a) if _remote(a) else a
                                for a in args)
        elif isinstance(args, dict) and any(map(_remote, args.values())):
            record.args = {k: exception.brief(v) if _remote(v) else v
                           for k, v in args.items()}
        return True


def _remote(value):
    return isinstance(value, BaseException) and (
        type(value).__name__.endswith('_Remote') or
        (hasattr(value, 'exc_type') and hasattr(value, 'value')))


def install(logger=None):
    """Add the filter to every handler of ``logger`` (default: the root
    logger, where oslo.log puts the daemons' handlers); idempotent."""
    for handler in (logger or stdlib_logging.getLogger()).handlers:
        if not any(isinstance(f, BriefRemoteErrors)
                   for f in handler.filters):
            handler.addFilter(BriefRemoteErrors())
