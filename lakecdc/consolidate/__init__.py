"""Consolidation: a table's change events folded into one net action per key (current state) or
into versions (SCD type 2 history), each with the replay of the keys that primary-key updates move."""
