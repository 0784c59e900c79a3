"""Alibaba's formats: Canal JSON (Canal, DTS), SharePlex JSON (DTS, Quest SharePlex), DTS Avro."""
