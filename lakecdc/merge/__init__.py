"""MERGE plans and the two engines that run them (delta-rs here, delta-spark where present)."""

from lakecdc.merge.plan import APP_ID, CDC_COLUMNS, MergePlan, MergeResult

__all__ = ["APP_ID", "CDC_COLUMNS", "MergePlan", "MergeResult"]
