"""Start-on-enter, stop-on-exit, for the harness's things that own processes.

A backend or a local deployment starts libvirtd instances, a broker and
numamig services; if starting fails halfway, what did start must still be
torn down, so ``__enter__`` stops on any failure (Ctrl-C included) before
re-raising. ``stop`` must therefore cope with a partial start.
"""


class StartStop:
    """Mixin: ``with obj:`` calls ``start()``, then ``stop()`` on exit or on
    a failed start."""

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info):
        self.stop()
