"""The NUMA engine: pure placement math, no I/O, no configuration.

constraints (flavor/image specs -> request), fit (request x host ->
placement, via cellfit, pinning, pages and matching), usage (apply or
release a placement), hostjson (the JSON forms the CLI reads and prints).
"""
