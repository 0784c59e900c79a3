"""The canonical change event every decoder produces, and what a run does with events before they
are folded: their column types, their order (``sequence_by``), whole transactions, the quarantine."""
