"""The target: how its Delta tables are named and laid out on disk (``_lakecdc/``, table
directories, tombstones, table info, the quarantine), the ledger of its inputs, the lease that
keeps one writer at a time, the runs table, and the summary of what a run did."""
