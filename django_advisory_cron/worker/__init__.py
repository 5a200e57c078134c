"""``cronworker``: the scheduling loop (``loop``) and its parts, one module each."""
