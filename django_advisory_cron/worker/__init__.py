"""``cronworker``: the scheduling loop and the live workers it shares jobs with."""
