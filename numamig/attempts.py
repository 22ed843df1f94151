"""How a request that is sent again shares its whole wait among its tries.

Both sides of numamig send idempotent requests again when an answer is
lost: the conductor its destination and source checks, an agent its
status changes and its requests to the destination. A request or an
answer lost with a broker restart (which deletes reply queues) or a dead
worker is lost at once, while a live peer answers in milliseconds, so
the tries wait growing shares of what the operator configured.
"""


def attempt_shares(total, attempts):
    """Each attempt's wait, in seconds: 1, 2, 3, ... parts of ``total``.

    A request lost with a broker restart is lost at once, and an answer
    normally comes in milliseconds, so the first attempt need not wait
    long; an agent slow to answer (a loaded host) gets the longer later
    ones. Together they wait ``total``, the option the operator set.
    """
    parts = attempts * (attempts + 1) // 2
    return [max(1, total * k // parts) for k in range(1, attempts + 1)]
