"""Avro: schemas and fingerprints, Object Container Files, values as exact text, schema-registry
exports and their Kafka Connect types.

Modules: :mod:`~lakecdc.decode.avro.schemas`, :mod:`~lakecdc.decode.avro.containers`,
:mod:`~lakecdc.decode.avro.text`, :mod:`~lakecdc.decode.avro.registry`,
:mod:`~lakecdc.decode.avro.connect`. Builds on :mod:`lakecdc.decode.files`; does not import
:mod:`lakecdc.decode.kafka`.
"""
