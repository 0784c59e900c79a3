"""Kafka records: message files (length-prefixed dumps, kcat ``-J``/``-K`` dumps), the records read
from them, and Kafka Connect JSON values with their schemas.

Modules: :mod:`~lakecdc.decode.kafka.dumps`, :mod:`~lakecdc.decode.kafka.records`,
:mod:`~lakecdc.decode.kafka.connect`, :mod:`~lakecdc.decode.kafka.connect_values`. Builds on
:mod:`lakecdc.decode.files`; does not import :mod:`lakecdc.decode.avro`.
"""
