"""Checking the data: data contracts (ODCS), their rules, and the Great Expectations suites run on
the tables and on incoming change streams."""
