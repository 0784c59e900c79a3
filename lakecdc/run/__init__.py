"""Running the pipeline: ``apply`` (plan, decode, profile, prepare, merge, record), the target's
ledger, lease, state and run records, and the summary a run returns."""
