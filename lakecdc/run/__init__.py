"""Running the pipeline: ``apply`` (plan, decode, profile, prepare, merge, record), its tables
worked on several at a time, reading change files and tables without applying them, and the
warm-up and contract inference built on it."""
