"""Keeping a target fast and whole: compaction, Z-order, vacuum and tombstone expiry
(:mod:`~lakecdc.maintenance.maintain`), and the doctor that checks the ledger against the tables."""
