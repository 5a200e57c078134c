"""Where a tick goes when it is not run in place: the seam to task queues (``targets``, where
each target registers itself) and the claim-then-send every target shares (``handover``)."""
